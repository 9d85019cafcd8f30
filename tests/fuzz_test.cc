// Copyright 2026 The Larder Authors.
//
// Seeded random-input tests of the parsers that take bytes from outside:
// S3 XML, WebHDFS JSON, store URIs, size and duration flags, and the
// short-circuit frame (against a real worker process). Each target mutates
// a corpus of valid inputs (byte flips, insertions of tokens the grammar
// cares about, deletions, duplications, truncations, splices) for a bounded
// time: no crash, no hang (every call well under a second), and the worker
// still serves afterwards. The same seed gives the same inputs:
// LARDER_FUZZ_SEED picks it (printed on failure), LARDER_FUZZ_SECONDS the
// time per target (default 2). Run under LARDER_SANITIZER=address or
// undefined for sanitizer reports.
#include <google/protobuf/stubs/logging.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <random>

#include "absl/flags/marshalling.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/short_circuit_client.h"
#include "common/block_proto.h"
#include "common/fd_socket.h"
#include "common/units.h"
#include "gtest/gtest.h"
#include "proto/worker.pb.h"
#include "tests/testing/process.h"
#include "tests/testing/worker_process.h"
#include "understore/factory.h"
#include "understore/hdfs_store.h"
#include "understore/uri.h"
#include "understore/xml.h"

namespace larder {
namespace {

uint64_t Seed() {
  const char* s = std::getenv("LARDER_FUZZ_SEED");
  return s != nullptr ? std::strtoull(s, nullptr, 10) : 20261123;
}

absl::Duration Budget() {
  const char* s = std::getenv("LARDER_FUZZ_SECONDS");
  return absl::Seconds(s != nullptr ? std::atof(s) : 2.0);
}

class Mutator {
 public:
  Mutator(std::vector<std::string> corpus, std::vector<std::string> tokens)
      : corpus_(std::move(corpus)), tokens_(std::move(tokens)), rng_(Seed()) {}

  std::string Next() {
    std::string s = corpus_[Pick(corpus_.size())];
    const int edits = 1 + static_cast<int>(Pick(8));
    for (int i = 0; i < edits; ++i) Mutate(&s);
    return s;
  }

 private:
  size_t Pick(size_t n) { return n == 0 ? 0 : rng_() % n; }
  void Mutate(std::string* s) {
    const size_t at = Pick(s->size() + 1);
    switch (Pick(8)) {
      case 0:  // Flip a byte.
        if (!s->empty()) (*s)[Pick(s->size())] ^= static_cast<char>(rng_());
        break;
      case 1:  // Insert a random byte.
        s->insert(at, 1, static_cast<char>(rng_()));
        break;
      case 2:  // Insert a token of the grammar.
        s->insert(at, tokens_[Pick(tokens_.size())]);
        break;
      case 3:  // Delete a range.
        s->erase(at, Pick(16));
        break;
      case 4: {  // Duplicate a range, sometimes many times.
        const std::string piece = s->substr(at, Pick(32));
        for (size_t n = 1 + Pick(rng_() % 4 == 0 ? 2000 : 3); n > 0; --n)
          s->insert(at, piece);
        break;
      }
      case 5:  // Truncate.
        s->resize(at);
        break;
      case 6: {  // Splice with another input.
        const std::string& o = corpus_[Pick(corpus_.size())];
        *s = s->substr(0, at) + o.substr(Pick(o.size() + 1));
        break;
      }
      default:  // Overwrite with a digit run (lengths, sizes, numbers).
        s->insert(at,
                  std::string(1 + Pick(25), static_cast<char>('0' + Pick(10))));
        break;
    }
  }

  const std::vector<std::string> corpus_;
  const std::vector<std::string> tokens_;
  std::mt19937_64 rng_;
};

// Feeds `target` mutated inputs for the budget; fails on a slow call.
template <typename F>
void Fuzz(Mutator& m, F target) {
  const absl::Time end = absl::Now() + Budget();
  int64_t runs = 0;
  absl::Duration slowest;
  std::string slowest_input;
  while (absl::Now() < end || runs < 100) {
    const std::string input = m.Next();
    const absl::Time t = absl::Now();
    target(input);
    const absl::Duration d = absl::Now() - t;
    if (d > slowest) {
      slowest = d;
      slowest_input = input;
    }
    ++runs;
  }
  std::fprintf(stderr, "slowest: %s\n",
               absl::CEscape(slowest_input.substr(0, 300)).c_str());
  EXPECT_LT(slowest, absl::Seconds(1))
      << "seed " << Seed() << ": slowest input (" << slowest_input.size()
      << " bytes) took " << slowest;
  std::printf("%lld inputs, slowest %s (seed %llu)\n",
              static_cast<long long>(runs),
              absl::FormatDuration(slowest).c_str(),
              static_cast<unsigned long long>(Seed()));
}

TEST(FuzzTest, S3Xml) {
  Mutator m(
      {R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>a/</Prefix><KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated><NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken><Contents><Key>a/x&amp;y.bin</Key><LastModified>2026-11-23T10:00:00.000Z</LastModified><ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><Size>434234</Size><StorageClass>STANDARD</StorageClass></Contents><CommonPrefixes><Prefix>a/b/</Prefix></CommonPrefixes></ListBucketResult>)",
       R"(<Error><Code>NoSuchKey</Code><Message>The resource you requested does not exist</Message><Resource>/b/k</Resource><RequestId>4442587FB7D0A2F9</RequestId></Error>)",
       R"(<a><![CDATA[x<y]]><!-- c --><b attr='1'/>&#65;&#x42;&lt;</a>)"},
      {"<",          ">",           "</",    "/>",        "&",   "&amp;",
       "&#",         "&#x",         ";",     "<![CDATA[", "]]>", "<!--",
       "-->",        "<?",          "?>",    "\"",        "'",   "=",
       "<Contents>", "</Contents>", "<Key>", "</Key>",    "\0"});
  Fuzz(m, [](const std::string& in) {
    absl::StatusOr<XmlElement> doc = ParseXml(in);
    if (doc.ok()) (void)doc->name;
  });
}

TEST(FuzzTest, WebHdfsJson) {
  Mutator m(
      {R"({"FileStatus":{"accessTime":0,"blockSize":134217728,"length":24930,"modificationTime":1320173277227,"pathSuffix":"","type":"FILE"}})",
       R"({"DirectoryListing":{"partialListing":{"FileStatuses":{"FileStatus":[{"length":24930,"modificationTime":1320171722771,"pathSuffix":"a.patch","type":"FILE"},{"length":0,"modificationTime":1320895981256,"pathSuffix":"bar","type":"DIRECTORY"}]}},"remainingEntries":2}})",
       R"({"FileStatuses":{"FileStatus":[{"length":1,"pathSuffix":"x","type":"FILE"}]}})",
       R"({"RemoteException":{"exception":"FileNotFoundException","message":"File does not exist: /foo"}})"},
      {"{", "}", "[", "]", ":", ",", "\"", "\\u0000", "\\", "1e308", "-1",
       "NaN", "null", "true", "\"pathSuffix\":\"../x\"",
       "\"length\":", "\"type\":\"DIRECTORY\"", "18446744073709551616"});
  Fuzz(m, [](const std::string& in) {
    auto st = webhdfs::ParseFileStatus(in, "d/f", "/d/f");
    auto l1 = webhdfs::ParseListing(in, "d", "/d", "", true);
    auto l2 = webhdfs::ParseListing(in, "d", "/d", "a", false);
    for (const auto* l : {&l1, &l2}) {
      if (!l->ok()) continue;
      for (const ObjectInfo& o : (*l)->first) {
        // Every entry stays inside the directory listed.
        EXPECT_EQ(o.path.rfind("d/", 0), 0u) << o.path;
        EXPECT_EQ(o.path.find("/..", 0), std::string::npos) << o.path;
      }
    }
    (void)st;
  });
}

TEST(FuzzTest, StoreUris) {
  Mutator m(
      {"s3://bucket/prefix/x?region=us-east-1&endpoint=http://127.0.0.1:9000",
       "azure://account/container/dir?endpoint=http://127.0.0.1:10000/account",
       "hdfs://namenode:9870/data/train", "file:///data/ds", "s3://b",
       "gs://x/y"},
      {"%", "%2F", "%00", "%zz", "?", "&", "=", "/", "//", "..", ":", "@", "#",
       "[", "]", "\\", " "});
  Fuzz(m, [](const std::string& in) {
    absl::StatusOr<StoreUri> u = ParseStoreUri(in);
    if (u.ok()) {
      EXPECT_FALSE(u->scheme.empty()) << in;
    }
    // Opening parses options too; nothing is contacted.
    UnderStoreOptions o;
    o.allowed_file_roots = {"/nonexistent-larder-root"};
    (void)OpenUnderStore(in, o);
  });
}

TEST(FuzzTest, SizeAndDurationFlags) {
  Mutator m({"4MiB", "1GiB", "512", "1.5GB", "0", "16 KiB", "8gib", "10s",
             "1h30m", "250ms", "-3s", "inf"},
            {"K", "M", "G", "T", "P", "E", "i", "B", ".", "-", "+", "e", "9",
             "ms", "us", "ns", "h", " "});
  Fuzz(m, [](const std::string& in) {
    absl::StatusOr<uint64_t> b = ParseBytes(in);
    (void)b;
    absl::Duration d;
    std::string error;
    if (absl::AbslParseFlag(in, &d, &error)) (void)absl::FormatDuration(d);
  });
}

// Frames from a hostile local peer: the worker drops the connection or
// answers with an error, and keeps serving everyone else.
TEST(FuzzTest, ShortCircuitFrames) {
  testing::TempDir data;
  ASSERT_TRUE(
      testing::WriteFile(data.path() + "/f.bin", "fuzzing-target").ok());
  auto worker = testing::WorkerProcess::Start(
      {absl::StrCat("--mount=ds=file://", data.path()),
       absl::StrCat("--allowed_file_roots=", data.path()),
       "--ram_capacity=64MiB"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  auto store = OpenUnderStore(absl::StrCat("file://", data.path()));
  ASSERT_TRUE(store.ok());
  auto info = (*store)->Stat("f.bin");
  ASSERT_TRUE(info.ok());
  const BlockId good{"ds", "f.bin", info->version, 0, 4 << 20, info->size};
  v1::ShortCircuitRequest req;
  req.set_op(v1::ShortCircuitRequest::OPEN);
  req.set_lease_ms(1000);
  ToProto(good, req.add_blocks());
  std::vector<std::string> corpus = {req.SerializeAsString()};
  req.set_op(v1::ShortCircuitRequest::EXPORT);
  corpus.push_back(req.SerializeAsString());
  req.set_op(v1::ShortCircuitRequest::RELEASE);
  req.add_lease_ids(1);
  req.add_lease_ids(99999);
  corpus.push_back(req.SerializeAsString());
  Mutator m(corpus, {std::string("\x08\x01", 2), std::string("\x12\x00", 2),
                     std::string("\xff\xff\xff\xff\x0f", 5), "\x1a", "\x22"});
  std::mt19937_64 rng(Seed());
  int conn = -1;
  Fuzz(m, [&](const std::string& payload) {
    if (conn < 0) {
      absl::StatusOr<int> c = ConnectUnix((*worker)->socket_path());
      ASSERT_TRUE(c.ok()) << c.status();
      conn = *c;
      timeval tv{0, 200000};  // A dropped request must not stall the test.
      ::setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }
    std::string frame;
    const uint32_t len = rng() % 16 == 0
                             ? static_cast<uint32_t>(rng())
                             : static_cast<uint32_t>(payload.size());
    for (int i = 0; i < 4; ++i)
      frame.push_back(static_cast<char>(len >> (8 * i)));
    frame += payload;
    if (rng() % 8 == 0) frame.resize(rng() % (frame.size() + 1));
    bool alive = ::send(conn, frame.data(), frame.size(), MSG_NOSIGNAL) ==
                 static_cast<ssize_t>(frame.size());
    google::protobuf::LogSilencer quiet;  // Invalid UTF-8 is expected here.
    v1::ShortCircuitRequest parsed;
    const bool one_way = parsed.ParseFromString(payload) &&
                         parsed.op() == v1::ShortCircuitRequest::RELEASE;
    if (alive && len == payload.size() && !one_way) {
      std::string answer;
      std::vector<int> fds;
      alive = RecvFrame(conn, &answer, &fds).ok();
      for (int fd : fds) ::close(fd);
    }
    if (!alive || rng() % 32 == 0) {
      ::close(conn);
      conn = -1;
    }
  });
  if (conn >= 0) ::close(conn);
  // Everyone else is still served, by short-circuit.
  auto client = ShortCircuitClient::Connect((*worker)->socket_path());
  ASSERT_TRUE(client.ok()) << client.status();
  std::string buf(64, '\0');
  auto n = (*client)->Read(good, 0, absl::MakeSpan(buf));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(buf.substr(0, *n), "fuzzing-target");
}

}  // namespace
}  // namespace larder
