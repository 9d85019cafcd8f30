// Copyright 2026 The Larder Authors.
#include "understore/http_client.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/retry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "understore/testing/tcp_listener.h"

namespace larder {
namespace {

using ::testing::HasSubstr;

TEST(HttpHelpersTest, EtagsLoseQuotesAndWeakMarker) {
  EXPECT_EQ(NormalizeEtag("\"abc\""), "abc");
  EXPECT_EQ(NormalizeEtag(" W/\"0x8D\" "), "0x8D");
  EXPECT_EQ(NormalizeEtag("plain"), "plain");
  EXPECT_EQ(NormalizeEtag("\""), "\"");
}

TEST(HttpHelpersTest, DatesAndNumbers) {
  EXPECT_EQ(ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT"),
            absl::FromUnixSeconds(784111777));
  EXPECT_EQ(ParseHttpDate("not a date"), absl::UnixEpoch());
  EXPECT_EQ(ParseUint("12345"), 12345u);
  EXPECT_EQ(ParseUint("-1"), std::nullopt);
  EXPECT_EQ(ParseUint(""), std::nullopt);
}

TEST(HttpHelpersTest, RangesSayTheirFirstByteAndTheObjectsSize) {
  HttpResponse r;
  r.status = 206;
  r.headers = {{"content-range", "bytes 100-199/1000"}};
  EXPECT_EQ(RangeStartOf(r), 100u);
  EXPECT_EQ(ObjectSizeOf(r), 1000u);
  r.headers = {{"content-range", "bytes */1000"}};
  EXPECT_EQ(RangeStartOf(r), std::nullopt);
  r.headers = {{"content-range", "items 1-2/3"}};
  EXPECT_EQ(RangeStartOf(r), std::nullopt);
  r.headers = {};
  EXPECT_EQ(RangeStartOf(r), std::nullopt);
}

TEST(HttpHelpersTest, HttpErrorsMapToNamedCodes) {
  const std::pair<long, absl::StatusCode> cases[] = {
      {429, absl::StatusCode::kResourceExhausted},
      {500, absl::StatusCode::kUnavailable},
      {503, absl::StatusCode::kUnavailable},
      {404, absl::StatusCode::kNotFound},
      {401, absl::StatusCode::kPermissionDenied},
      {403, absl::StatusCode::kPermissionDenied},
      {304, absl::StatusCode::kFailedPrecondition},
      {412, absl::StatusCode::kFailedPrecondition},
      {416, absl::StatusCode::kOutOfRange},
      {400, absl::StatusCode::kInvalidArgument},
      {418, absl::StatusCode::kUnknown},
  };
  for (const auto& [http, code] : cases) {
    const absl::Status st = HttpErrorStatus(http, "S3 read of x", "object");
    EXPECT_EQ(st.code(), code) << http;
    EXPECT_THAT(std::string(st.message()),
                ::testing::HasSubstr("S3 read of x"));
  }
  EXPECT_THAT(std::string(HttpErrorStatus(412, "m", "blob").message()),
              ::testing::HasSubstr("(the blob changed)"));
}

// A socket that listens and never accepts: the kernel completes connections
// into its backlog, and nothing ever answers (a stopped server). Returns the
// fd (-1 on failure) and the port.
int SilentListener(int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
      ::listen(fd, 4) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

HttpOptions Quick() {
  HttpOptions o;
  o.connect_timeout = absl::Seconds(2);
  o.request_timeout = absl::Seconds(5);
  return o;
}

// Only http and https leave the process: a file:// URL (which libcurl would
// read from the local disk), dict:// and gopher:// (which write the URL's
// bytes into any TCP port: the classic SSRF into memcached or redis) are
// refused before any connection; the listener they point at sees nothing.
TEST(HttpClientTest, OnlyHttpAndHttpsAreFetched) {
  testing::TcpListener target;
  ASSERT_GT(target.port(), 0);
  HttpClient http(Quick());
  for (const std::string& url :
       {std::string("file:///etc/passwd"),
        absl::StrCat("dict://127.0.0.1:", target.port(), "/info"),
        absl::StrCat("gopher://127.0.0.1:", target.port(), "/_SET%20x%201"),
        absl::StrCat("ftp://127.0.0.1:", target.port(), "/x"),
        absl::StrCat("telnet://127.0.0.1:", target.port())}) {
    HttpRequest req;
    req.url = url;
    auto r = http.Send(req);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
        << url << ": "
        << (r.ok() ? absl::StrCat("HTTP ", r->status, " body ", r->body)
                   : r.status().ToString());
  }
  EXPECT_EQ(target.accepted(), 0);
}

// libcurl never follows a redirect itself: the 302 comes back to the caller
// with its Location, and the place it points at gets no connection.
TEST(HttpClientTest, RedirectsAreReturnedNotFollowed) {
  testing::TcpListener target;
  ASSERT_GT(target.port(), 0);
  const std::string location =
      absl::StrCat("http://127.0.0.1:", target.port(), "/elsewhere");
  testing::TcpListener web(
      absl::StrCat("HTTP/1.1 302 Found\r\nLocation: ", location,
                   "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"));
  ASSERT_GT(web.port(), 0);
  HttpClient http(Quick());
  HttpRequest req;
  req.url = absl::StrCat("http://127.0.0.1:", web.port(), "/start");
  auto r = http.Send(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 302);
  EXPECT_EQ(r->Header("location"), location);
  EXPECT_EQ(web.accepted(), 1);
  EXPECT_EQ(target.accepted(), 0);
}

// A pinned name connects where the pin says, whatever DNS would answer (the
// name here does not exist at all), and a request without time left is not
// sent.
TEST(HttpClientTest, ResolvePinsAndTimeoutCaps) {
  testing::TcpListener web(
      "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
  ASSERT_GT(web.port(), 0);
  HttpClient http(Quick());
  HttpRequest req;
  req.url = absl::StrCat("http://datanode.invalid:", web.port(), "/x");
  req.resolve = {absl::StrCat("+datanode.invalid:", web.port(), ":127.0.0.1")};
  auto r = http.Send(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(web.accepted(), 1);

  req.timeout = absl::ZeroDuration();
  EXPECT_EQ(http.Send(req).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(web.accepted(), 1);

  // A server that never answers: the request's own timeout, not the 5 s of
  // the options, ends it.
  int port = 0;
  const int silent = SilentListener(&port);
  ASSERT_GE(silent, 0);
  req.url = absl::StrCat("http://127.0.0.1:", port, "/");
  req.resolve.clear();
  req.timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  EXPECT_EQ(http.Send(req).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  ::close(silent);
}

// A store that accepts connections and never answers (a stopped server):
// the request ends after --store_timeout without a byte, as stalled, which
// retries do not repeat.
TEST(HttpClientTest, AStoreThatSendsNothingIsStalledAndNotRetried) {
  int port = 0;
  const int silent = SilentListener(&port);
  ASSERT_GE(silent, 0);
  HttpOptions o = Quick();
  o.request_timeout = absl::Seconds(60);
  o.store_timeout = absl::Seconds(1);
  HttpClient http(o);
  HttpRequest req;
  req.url = absl::StrCat("http://127.0.0.1:", port, "/");
  const absl::Time start = absl::Now();
  int attempts = 0;
  absl::Status st = RetryWithBackoff(o.retry, "test.get", [&] {
    ++attempts;
    return http.Send(req).status();
  });
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_TRUE(IsStalled(st)) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("--store_timeout"));
  EXPECT_EQ(attempts, 1);
  EXPECT_GE(took, absl::Seconds(1));
  EXPECT_LT(took, absl::Seconds(4));
  ::close(silent);
}

}  // namespace
}  // namespace larder
