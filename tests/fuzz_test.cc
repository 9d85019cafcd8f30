// Copyright 2026 The Larder Authors.
//
// Seeded random-input tests of the parsers that take bytes from outside:
// S3 XML, WebHDFS JSON, store URIs, size and duration flags, and the
// short-circuit frame and the numeric fields of the worker's RPCs (against
// a real worker process). Each target mutates
// a corpus of valid inputs (byte flips, insertions of tokens the grammar
// cares about, deletions, duplications, truncations, splices) for a bounded
// time: no crash, no hang (every call well under a second), and the worker
// still serves afterwards. The same seed gives the same inputs:
// LARDER_FUZZ_SEED picks it (printed on failure), LARDER_FUZZ_SECONDS the
// time per target (default 2). Run under LARDER_SANITIZER=address or
// undefined for sanitizer reports.
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
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
#include "proto/worker.grpc.pb.h"
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

// Every numeric field of the worker's data RPCs from a caller who speaks
// the wire protocol directly: offsets, lengths, object and block sizes,
// indexes and chunk sizes near 0, the real values and 2^64. A read is either
// refused with a named code or returns exactly the object's bytes: never a
// byte from outside the block, never bytes cached under a size the
// under-store did not give. The worker stays up throughout.
TEST(FuzzTest, WorkerRpcNumericFields) {
  testing::TempDir data;
  const uint64_t kBlock = 64 << 10;  // Several blocks, the last one short.
  const std::string bytes = testing::PatternBytes(3 * kBlock + 4321, 9);
  ASSERT_TRUE(testing::WriteFile(data.path() + "/f.bin", bytes).ok());
  auto worker = testing::WorkerProcess::Start(
      {absl::StrCat("--mount=ds=file://", data.path()),
       absl::StrCat("--allowed_file_roots=", data.path()),
       "--ram_capacity=64MiB", "--block_size=64KiB"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  auto store = OpenUnderStore(absl::StrCat("file://", data.path()));
  ASSERT_TRUE(store.ok());
  auto info = (*store)->Stat("f.bin");
  ASSERT_TRUE(info.ok());
  const uint64_t size = info->size;
  auto stub = v1::WorkerData::NewStub(grpc::CreateChannel(
      (*worker)->address(), grpc::InsecureChannelCredentials()));
  std::mt19937_64 rng(Seed());
  const uint64_t kMax = ~uint64_t{0};
  auto pick = [&](std::initializer_list<uint64_t> near) {
    if (rng() % 4 == 0) return static_cast<uint64_t>(rng());
    std::vector<uint64_t> v(near);
    const uint64_t base = v[rng() % v.size()];
    const int64_t delta = static_cast<int64_t>(rng() % 3) - 1;
    return base + static_cast<uint64_t>(delta);  // Wraps on purpose.
  };
  const absl::Time end = absl::Now() + Budget();
  int64_t reads = 0, served = 0;
  while (absl::Now() < end) {
    BlockId id{"ds", "f.bin", info->version};
    id.index = pick({0, 1, 3, 4, kMax / kBlock});
    id.block_size = rng() % 2 ? kBlock : pick({kBlock, 1, 1u << 30, 0});
    id.object_size = rng() % 2 ? size : pick({size, 0, kBlock, kMax});
    v1::ReadBlockRequest req;
    ToProto(id, req.mutable_block());
    const uint64_t held = id.Validate().ok() ? id.length() : kBlock;
    req.set_offset(pick({0, held, kMax, uint64_t{1} << 63}));
    req.set_length(pick({0, held, kMax - req.offset(), kMax}));
    req.set_max_chunk_bytes(static_cast<uint32_t>(pick({0, 64 << 10})));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(10));
    auto reader = stub->ReadBlock(&ctx, req);
    std::string got;
    v1::ReadBlockResponse resp;
    while (reader->Read(&resp)) got += resp.data();
    const grpc::Status st = reader->Finish();
    ++reads;
    const bool honest = id.block_size == kBlock && id.object_size == size &&
                        id.index < BlockCount(size, kBlock);
    if (!st.ok()) {
      EXPECT_NE(st.error_code(), grpc::StatusCode::UNKNOWN)
          << st.error_message();
      EXPECT_NE(st.error_code(), grpc::StatusCode::INTERNAL)
          << st.error_message();
      EXPECT_NE(st.error_code(), grpc::StatusCode::UNAVAILABLE)
          << st.error_message();
      EXPECT_EQ(got, "");
      if (honest && req.offset() <= id.length()) {
        ADD_FAILURE() << "an honest read was refused: " << st.error_message();
      }
      continue;
    }
    ++served;
    ASSERT_TRUE(honest) << "served a block under a size or block size the "
                           "store did not give: index "
                        << id.index << " block " << id.block_size << " object "
                        << id.object_size;
    const uint64_t len = id.length();
    ASSERT_LE(req.offset(), len);
    const uint64_t want = req.length() == 0
                              ? len - req.offset()
                              : std::min(req.length(), len - req.offset());
    ASSERT_EQ(got.size(), want);
    ASSERT_TRUE(got == bytes.substr(id.offset() + req.offset(), want));
  }
  std::printf("%lld reads, %lld served (seed %llu)\n",
              static_cast<long long>(reads), static_cast<long long>(served),
              static_cast<unsigned long long>(Seed()));
  EXPECT_GT(served, 0);
  // Prefetches of the same fields: refused or cached as the store says.
  v1::CacheBlocksRequest cache;
  cache.set_wait(true);
  for (int i = 0; i < 64; ++i) {
    BlockId id{"ds",
               "f.bin",
               info->version,
               pick({0, 3, 4}),
               rng() % 2 ? kBlock : pick({kBlock, 0}),
               rng() % 2 ? size : pick({size, 0, kMax})};
    ToProto(id, cache.add_blocks());
  }
  v1::CacheBlocksResponse cached;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->CacheBlocks(&ctx, cache, &cached).ok());
  ASSERT_EQ(cached.results_size(), 64);
  for (const v1::BlockResult& r : cached.results()) {
    const BlockId id = FromProto(r.block());
    const bool honest = id.block_size == kBlock && id.object_size == size &&
                        id.index < BlockCount(size, kBlock);
    EXPECT_EQ(r.code() == 0, honest) << r.message();
  }
  // Still serving, exactly.
  auto client = ShortCircuitClient::Connect((*worker)->socket_path());
  ASSERT_TRUE(client.ok()) << client.status();
  BlockId last{"ds", "f.bin", info->version, 3, kBlock, size};
  std::string buf(last.length(), '\0');
  auto n = (*client)->Read(last, 0, absl::MakeSpan(buf));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_TRUE(buf == bytes.substr(3 * kBlock));
}

}  // namespace
}  // namespace larder
