// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: tcp_listener.h
// -----------------------------------------------------------------------------
//
// A plain TCP listener for tests of outbound-request policy (linked only by
// tests): it counts every connection it accepts, answers each with a canned
// reply (after reading the request head, when there is a reply to give) and
// closes it. A test points a redirect, a URL or a pinned name at it and then
// asserts accepted() == 0 ("nothing was fetched from there") or > 0.
//
//   TcpListener target;                      // silent: accept, close
//   TcpListener web("HTTP/1.1 302 Found\r\nLocation: ...\r\n\r\n");
//   ... EXPECT_EQ(target.accepted(), 0);
//
// Thread-safe: one thread of its own accepts; accepted() may be read from
// any thread. The destructor stops the thread and closes the socket.
#ifndef LARDER_UNDERSTORE_TESTING_TCP_LISTENER_H_
#define LARDER_UNDERSTORE_TESTING_TCP_LISTENER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

namespace larder::testing {

class TcpListener {
 public:
  // Listens on `address` (IPv4), port chosen by the kernel. `reply` is sent
  // to every connection once its request head ("\r\n\r\n") arrived, or after
  // 2 s; an empty reply closes at once.
  explicit TcpListener(std::string reply = "",
                       const std::string& address = "127.0.0.1")
      : reply_(std::move(reply)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
    socklen_t len = sizeof(a);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        ::listen(fd_, 64) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~TcpListener() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  // 0 when the listener could not be set up.
  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  void Loop() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      ++accepted_;
      if (!reply_.empty()) {
        std::string head;
        char buf[4096];
        pollfd q{c, POLLIN, 0};
        while (head.find("\r\n\r\n") == std::string::npos &&
               ::poll(&q, 1, 2000) > 0) {
          const ssize_t n = ::read(c, buf, sizeof(buf));
          if (n <= 0) break;
          head.append(buf, static_cast<size_t>(n));
        }
        size_t done = 0;
        while (done < reply_.size()) {
          const ssize_t n = ::send(c, reply_.data() + done,
                                   reply_.size() - done, MSG_NOSIGNAL);
          if (n <= 0) break;
          done += static_cast<size_t>(n);
        }
      }
      ::shutdown(c, SHUT_RDWR);
      ::close(c);
    }
  }

  const std::string reply_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace larder::testing

#endif  // LARDER_UNDERSTORE_TESTING_TCP_LISTENER_H_
