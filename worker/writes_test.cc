// Copyright 2026 The Larder Authors.
//
// The worker's half of a write, in process (so the sanitizers see it): the
// WritePart and PublishWrite RPCs of a DataService over a file:// mount,
// what they refuse, and WriteStaging's budget.
#include "worker/writes.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/worker_client.h"
#include "common/write_part_wire.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/master.pb.h"
#include "tests/testing/process.h"
#include "understore/factory.h"
#include "worker/data_service.h"

namespace larder {
namespace {

constexpr uint64_t kBlock = 1 << 20;

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>((i * 131 + seed * 7) >> 3);
  return s;
}

class WritesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path() + "/root";
    std::filesystem::create_directories(root_);
    auto store = OpenUnderStore("file://" + root_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::shared_ptr<UnderStore>(std::move(*store));
    v1::MountEntry m;
    m.set_path("/ckpt");
    m.set_uri("file://" + root_);
    m.set_block_size(kBlock);
    m.set_writable(true);
    ASSERT_TRUE(mounts_.Add(m, store_).ok());
    m.set_path("/ro");
    m.set_writable(false);
    ASSERT_TRUE(mounts_.Add(m, store_).ok());
    auto bs = BlockStore::Create({}, &mounts_, &metrics_);
    ASSERT_TRUE(bs.ok()) << bs.status();
    blocks_ = std::move(*bs);
    staging_ = std::make_unique<WriteStaging>(
        blocks_.get(), WriteStagingOptions{.max_bytes = 8 * kBlock});
    // Tokens: an admin and a reader.
    const std::string tokens = dir_.path() + "/tokens";
    ASSERT_TRUE(testing::WriteFile(tokens,
                                   "admin admin-token-0123456789\n"
                                   "writer writer-token-0123456789\n"
                                   "reader reader-token-0123456789\n")
                    .ok());
    ASSERT_TRUE(
        testing::WriteFile(dir_.path() + "/admin", "admin-token-0123456789\n")
            .ok());
    ASSERT_TRUE(
        testing::WriteFile(dir_.path() + "/reader", "reader-token-0123456789\n")
            .ok());
    ASSERT_TRUE(
        testing::WriteFile(dir_.path() + "/writer", "writer-token-0123456789\n")
            .ok());
    SecurityOptions so;
    so.auth_tokens_file = tokens;
    auto auth = Authorizer::Create(so);
    ASSERT_TRUE(auth.ok()) << auth.status();
    auth_ = std::move(*auth);
    // A peer: a second worker of the ring, with a store and staging of
    // its own, to which the first sends the blocks it owns.
    auto pbs = BlockStore::Create({}, &mounts_, &peer_metrics_);
    ASSERT_TRUE(pbs.ok()) << pbs.status();
    peer_blocks_ = std::move(*pbs);
    peer_staging_ = std::make_unique<WriteStaging>(
        peer_blocks_.get(), WriteStagingOptions{.max_bytes = 8 * kBlock});
    peer_service_ = std::make_unique<DataService>(
        peer_blocks_.get(), &peer_metrics_, &pool_, auth_.get(), &mounts_);
    peer_service_->EnableWrites(peer_staging_.get(), &uploads_, &peer_intake_,
                                nullptr, nullptr, Committed());
    peer_server_ = Serve(peer_service_.get(), &peer_port_);
    ASSERT_NE(peer_server_, nullptr);
    // The ring the first worker learns from "the master": the peer alone.
    peers_ = std::make_unique<PeerSet>(
        [this]() -> absl::StatusOr<v1::Ring> {
          v1::Ring ring;
          ring.add_workers()->set_address(Address(peer_port_));
          return ring;
        },
        nullptr);
    SecurityOptions as_admin;
    as_admin.token_file = dir_.path() + "/admin";
    auto channels = ChannelFactory::Create(as_admin);
    ASSERT_TRUE(channels.ok()) << channels.status();
    service_ = std::make_unique<DataService>(blocks_.get(), &metrics_, &pool_,
                                             auth_.get(), &mounts_);
    service_->EnableWrites(staging_.get(), &uploads_, &intake_,
                           std::move(*channels), peers_.get(), Committed());
    server_ = Serve(service_.get(), &port_);
    ASSERT_NE(server_, nullptr);
    admin_ = Connect("admin");
    writer_ = Connect("writer");
    reader_ = Connect("reader");
  }

  // The test plays the master: what it committed (Commit), as
  // Master.GetCommittedWrite answers it.
  DataService::CommittedLookup Committed() {
    return [this](const std::string& id) -> absl::StatusOr<v1::CommittedWrite> {
      absl::MutexLock lock(&committed_mu_);
      auto it = committed_.find(id);
      if (it == committed_.end())
        return absl::NotFoundError("no write the test committed");
      return it->second;
    };
  }
  absl::StatusOr<ObjectInfo> Commit(const v1::WriteHandle& h,
                                    const std::vector<UploadedPart>& parts) {
    absl::StatusOr<ObjectInfo> info =
        store_->CompleteUpload(h.relative(), h.upload_id(), parts);
    if (info.ok()) {
      v1::CommittedWrite c;
      *c.mutable_handle() = h;
      c.set_version(info->version);
      c.set_object_size(info->size);
      absl::MutexLock lock(&committed_mu_);
      committed_[h.write_id()] = c;
    }
    return info;
  }

  void TearDown() override {
    if (server_) server_->Shutdown();
    if (peer_server_) peer_server_->Shutdown();
  }

  static std::string Address(int port) {
    return absl::StrCat("127.0.0.1:", port);
  }

  static std::unique_ptr<grpc::Server> Serve(DataService* service, int* port) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
    b.RegisterService(service);
    return b.BuildAndStart();
  }

  std::unique_ptr<WorkerClient> Connect(const std::string& who) {
    SecurityOptions so;
    so.token_file = dir_.path() + "/" + who;
    auto f = ChannelFactory::Create(so);
    EXPECT_TRUE(f.ok()) << f.status();
    return std::make_unique<WorkerClient>(absl::StrCat("127.0.0.1:", port_),
                                          **f);
  }

  v1::WriteHandle Begin(const std::string& rel) {
    auto id = store_->CreateUpload(rel);
    EXPECT_TRUE(id.ok()) << id.status();
    v1::WriteHandle h;
    h.set_write_id(absl::StrCat("w-", rel));
    h.set_mount("/ckpt");
    h.set_relative(rel);
    h.set_upload_id(id.ok() ? *id : "");
    h.set_block_size(kBlock);
    h.set_part_size(6 * kBlock);
    return h;
  }

  static v1::WritePartHeader Part(const v1::WriteHandle& h, uint64_t size) {
    v1::WritePartHeader p;
    *p.mutable_handle() = h;
    p.set_number(1);
    p.set_size(size);
    p.set_upload(true);
    for (uint64_t b = 0; b * kBlock < size; ++b) p.add_keep_blocks(b);
    return p;
  }

  testing::TempDir dir_;
  std::string root_;
  std::shared_ptr<UnderStore> store_;
  WorkerMounts mounts_;
  WorkerMetrics metrics_;
  std::unique_ptr<BlockStore> blocks_;
  std::unique_ptr<WriteStaging> staging_;
  ThreadPool pool_{8, "writes-test"};
  // One upload thread for both workers: what waits on a peer (a part's
  // forwards, a publish's) must never need the peer's upload threads, or two
  // workers forwarding to each other with every upload thread busy would
  // wait on each other.
  ThreadPool uploads_{1, "writes-uploads"};
  ThreadPool intake_{2, "writes-intake"};
  ThreadPool peer_intake_{2, "peer-intake"};
  WorkerMetrics peer_metrics_;
  std::unique_ptr<BlockStore> peer_blocks_;
  std::unique_ptr<WriteStaging> peer_staging_;
  std::unique_ptr<DataService> peer_service_;
  std::unique_ptr<grpc::Server> peer_server_;
  int peer_port_ = 0;
  std::unique_ptr<PeerSet> peers_;
  std::unique_ptr<Authorizer> auth_;
  std::unique_ptr<DataService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::unique_ptr<WorkerClient> admin_, writer_, reader_;
  absl::Mutex committed_mu_;
  std::map<std::string, v1::CommittedWrite> committed_
      ABSL_GUARDED_BY(committed_mu_);
};

TEST_F(WritesTest, APartIsUploadedKeptAndPublishedAsCachedBlocks) {
  const std::string data = Pattern(2 * kBlock + 12345, 1);
  v1::WriteHandle h = Begin("a/step.pt");
  auto r = admin_->WritePart(Part(h, data.size()), data);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kept_blocks(), 3u);
  EXPECT_EQ(r->part().size(), data.size());
  EXPECT_GE(staging_->bytes(), data.size());
  // Not visible, and not served, before the commit.
  EXPECT_EQ(store_->Stat("a/step.pt").status().code(),
            absl::StatusCode::kNotFound);
  UploadedPart part{1, 0, data.size(), r->part().token()};
  auto info = Commit(h, {part});
  ASSERT_TRUE(info.ok()) << info.status();
  // A version the master did not commit: nothing is cached.
  v1::PublishWriteRequest wrong;
  *wrong.mutable_handle() = h;
  wrong.set_version("not-the-version");
  wrong.set_object_size(data.size());
  EXPECT_EQ(admin_->PublishWrite(wrong).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // The blocks were dropped with the refusal: a worker sends them again.
  v1::WritePartHeader again = Part(h, data.size());
  again.set_upload(false);
  ASSERT_TRUE(admin_->WritePart(again, data).ok());
  v1::PublishWriteRequest pub;
  *pub.mutable_handle() = h;
  pub.set_version(info->version);
  pub.set_object_size(info->size);
  auto published = admin_->PublishWrite(pub);
  ASSERT_TRUE(published.ok()) << published.status();
  EXPECT_EQ(published->published_blocks(), 3u);
  EXPECT_EQ(staging_->bytes(), 0u);
  EXPECT_EQ(staging_->writes(), 0u);
  for (uint64_t i = 0; i < 3; ++i) {
    BlockId id{"/ckpt", "a/step.pt", info->version, i, kBlock, info->size};
    std::shared_ptr<const Block> b = blocks_->TryGetCached(id);
    ASSERT_NE(b, nullptr) << i;
    EXPECT_EQ(std::string(b->data()), data.substr(i * kBlock, id.length()));
  }
  EXPECT_EQ(metrics_.misses.Value(), 0);
}

// A writer of the mount cannot make the cache serve bytes the store does
// not hold: not by keeping blocks under a write id the master never began
// and publishing them as an object's current version, not by keeping
// blocks without an upload, not with a part whose upload failed.
TEST_F(WritesTest, OnlyWhatTheMasterCommittedIsPublished) {
  const std::string truth = Pattern(kBlock + 99, 8);
  ASSERT_TRUE(testing::WriteFile(root_ + "/victim.pt", truth).ok());
  auto victim = store_->Stat("victim.pt");
  ASSERT_TRUE(victim.ok()) << victim.status();
  const std::string lie = Pattern(truth.size(), 9);
  // A write id of the writer's own, with an upload it started itself.
  v1::WriteHandle forged = Begin("victim.pt");
  forged.set_write_id("forged");
  auto r = writer_->WritePart(Part(forged, lie.size()), lie);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kept_blocks(), 2u);
  v1::PublishWriteRequest pub;
  *pub.mutable_handle() = forged;
  pub.set_version(victim->version);
  pub.set_object_size(victim->size);
  auto published = writer_->PublishWrite(pub);
  EXPECT_EQ(published.status().code(), absl::StatusCode::kFailedPrecondition)
      << published.status();
  EXPECT_THAT(std::string(published.status().message()),
              ::testing::HasSubstr("does not confirm"));
  EXPECT_EQ(staging_->writes(), 0u);
  for (uint64_t i = 0; i < 2; ++i) {
    BlockId id{"/ckpt", "victim.pt", victim->version, i, kBlock, victim->size};
    EXPECT_EQ(blocks_->TryGetCached(id), nullptr) << i;
  }
  // A real write the master committed, published under another write's
  // version, or under another handle: nothing either.
  v1::WriteHandle real = Begin("real.pt");
  r = writer_->WritePart(Part(real, lie.size()), lie);
  ASSERT_TRUE(r.ok()) << r.status();
  auto info = Commit(real, {UploadedPart{1, 0, lie.size(), r->part().token()}});
  ASSERT_TRUE(info.ok()) << info.status();
  v1::PublishWriteRequest other = pub;
  *other.mutable_handle() = real;
  other.set_object_size(lie.size());  // The victim's version, this size.
  EXPECT_EQ(writer_->PublishWrite(other).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(staging_->writes(), 0u);
  v1::WriteHandle again = Begin("again.pt");
  r = writer_->WritePart(Part(again, lie.size()), lie);
  ASSERT_TRUE(r.ok()) << r.status();
  info = Commit(again, {UploadedPart{1, 0, lie.size(), r->part().token()}});
  ASSERT_TRUE(info.ok()) << info.status();
  *other.mutable_handle() = again;
  other.set_version(info->version);
  other.mutable_handle()->set_relative("victim.pt");  // Not its parts' path.
  EXPECT_EQ(writer_->PublishWrite(other).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(staging_->writes(), 0u);
  // A part is where its number puts it: part 1 is at 0, not at block 2
  // (whose kept bytes the real part 1 would not replace).
  v1::WritePartHeader misplaced = Part(Begin("misplaced.pt"), kBlock);
  misplaced.set_offset(2 * kBlock);
  misplaced.clear_keep_blocks();
  misplaced.add_keep_blocks(2);
  auto moved = writer_->WritePart(misplaced, lie.substr(0, kBlock));
  EXPECT_EQ(moved.status().code(), absl::StatusCode::kInvalidArgument)
      << moved.status();
  EXPECT_EQ(staging_->writes(), 0u);
  // Keeping without an upload is a worker's (the admin role's) only.
  v1::WritePartHeader keep_only = Part(real, lie.size());
  keep_only.set_upload(false);
  auto refused = writer_->WritePart(keep_only, lie);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied)
      << refused.status();
  // A part whose upload fails keeps nothing.
  v1::WriteHandle broken = Begin("broken.pt");
  broken.set_upload_id("no-such-upload");
  EXPECT_FALSE(writer_->WritePart(Part(broken, lie.size()), lie).ok());
  EXPECT_EQ(staging_->writes(), 0u);
  EXPECT_EQ(staging_->bytes(), 0u);
}

TEST_F(WritesTest, MalformedPartsAreRefused) {
  const std::string data = Pattern(kBlock + 5, 2);
  v1::WriteHandle h = Begin("m.pt");
  using H = v1::WritePartHeader;
  auto send = [&](auto edit, WorkerClient* c = nullptr) {
    H p = Part(h, data.size());
    edit(p);
    return (c ? c : admin_.get())->WritePart(p, data).status().code();
  };
  constexpr auto kBad = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(send([](H& p) { p.set_offset(7); }), kBad);
  EXPECT_EQ(send([](H& p) { p.set_size(100); }), kBad);
  EXPECT_EQ(send([&](H& p) { p.set_size(data.size() + 1); }), kBad);
  EXPECT_EQ(send([](H& p) { p.add_keep_blocks(9); }), kBad);
  EXPECT_EQ(send([](H& p) { p.add_keep_blocks(UINT64_MAX); }), kBad);
  EXPECT_EQ(send([](H& p) { p.set_number(0); }), kBad);
  EXPECT_EQ(send([](H& p) { p.set_number(10001); }), kBad);
  EXPECT_EQ(send([](H& p) { p.set_offset(UINT64_MAX - kBlock + 1); }), kBad);
  EXPECT_EQ(send([](H& p) { p.set_size(6ull << 30); }), kBad);
  EXPECT_EQ(send([](H& p) { p.mutable_handle()->set_block_size(4096); }), kBad);
  EXPECT_EQ(send([](H& p) { p.mutable_handle()->set_write_id(""); }), kBad);
  EXPECT_EQ(send([](H& p) { p.mutable_handle()->set_upload_id(""); }), kBad);
  EXPECT_EQ(send([](H& p) { p.mutable_handle()->set_mount("/ro"); }),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(send([](H& p) { p.mutable_handle()->set_mount("/none"); }),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(send([](H&) {}, reader_.get()),
            absl::StatusCode::kPermissionDenied);
  // Nothing kept, nothing reserved after all that.
  EXPECT_EQ(staging_->bytes(), 0u);
  EXPECT_EQ(staging_->writes(), 0u);
  // A stream with no header at all.
  EXPECT_EQ(admin_->WritePart(H(), "").status().code(), kBad);
}

// One WritePart call of raw messages, as a client that does not use
// protobuf (or means harm) may send them; returns the call's status.
class RawWritePartCall final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit RawWritePartCall(std::vector<std::string> messages)
      : messages_(std::move(messages)) {}

  grpc::Status Run(grpc::GenericStub& stub) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(30));
    stub.PrepareBidiStreamingCall(&ctx, "/larder.v1.WorkerData/WritePart",
                                  grpc::StubOptions(), this);
    StartRead(&in_);
    Next();
    StartCall();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
    return status_;
  }
  void OnWriteDone(bool ok) override {
    if (ok) Next();
  }
  void OnDone(const grpc::Status& s) override {
    absl::MutexLock lock(&mu_);
    status_ = s;
    done_ = true;
  }

 private:
  void Next() {
    if (next_ == messages_.size()) {
      StartWritesDone();
      return;
    }
    grpc::Slice slice(messages_[next_++]);
    out_ = grpc::ByteBuffer(&slice, 1);
    StartWrite(&out_);
  }

  const std::vector<std::string> messages_;
  size_t next_ = 0;  // Touched by Next only, which gRPC serializes.
  grpc::ByteBuffer out_, in_;
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

TEST_F(WritesTest, MalformedRawMessagesAreRefusedAndHoldNothing) {
  const std::string data = Pattern(kBlock, 4);
  v1::WriteHandle h = Begin("raw.pt");
  const v1::WritePartHeader header = Part(h, data.size());
  SecurityOptions so;
  so.token_file = dir_.path() + "/admin";
  auto f = ChannelFactory::Create(so);
  ASSERT_TRUE(f.ok()) << f.status();
  grpc::GenericStub stub(
      (*f)->Channel(Address(port_), grpc::ChannelArguments()));
  auto refused = [&](std::vector<std::string> messages) {
    grpc::Status st = RawWritePartCall(std::move(messages)).Run(stub);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << st.error_message();
    return st.error_message();
  };
  const std::string first =
      WritePartRequestHead(&header, 100) + data.substr(0, 100);
  using ::testing::HasSubstr;
  EXPECT_THAT(refused({"\xff\xff\xff"}), HasSubstr("truncated"));
  EXPECT_THAT(refused({WritePartRequestHead(nullptr, 3) + "abc"}),
              HasSubstr("the first message has no header"));
  EXPECT_THAT(refused({first, first}), HasSubstr("a second header"));
  EXPECT_THAT(
      refused({WritePartRequestHead(&header, 100) + data.substr(0, 50)}),
      HasSubstr("runs past the message"));
  EXPECT_THAT(refused({WritePartRequestHead(&header, data.size()) + data,
                       WritePartRequestHead(nullptr, 1) + "x"}),
              HasSubstr("more data than the part's"));
  EXPECT_THAT(refused({first}), HasSubstr("the stream ended after 100"));
  // Nothing kept and no budget held after all that; a good part still goes.
  EXPECT_EQ(staging_->bytes(), 0u);
  EXPECT_EQ(staging_->writes(), 0u);
  grpc::Status ok =
      RawWritePartCall({WritePartRequestHead(&header, data.size()) + data})
          .Run(stub);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
}

TEST_F(WritesTest, ThePartBudgetIsBoundedAndKeptBlocksNeverStallAnUpload) {
  // 8 blocks of budget: a part of 9 never fits, and says what to raise.
  const std::string data = Pattern(9 * kBlock, 3);
  v1::WriteHandle h = Begin("big.pt");
  h.set_part_size(9 * kBlock);
  auto too_big = admin_->WritePart(Part(h, data.size()), data);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(too_big.status().message()),
              ::testing::HasSubstr("--write_buffer"));
  EXPECT_EQ(staging_->bytes(), 0u);
  // Parts of 4 blocks: each part's blocks are kept out of its own
  // reservation, so two fill the budget with kept blocks...
  const std::string four = Pattern(4 * kBlock, 4);
  h.set_part_size(4 * kBlock);
  auto part = [&](uint32_t number) {
    v1::WritePartHeader p = Part(h, four.size());
    p.set_number(number);
    p.set_offset((number - 1) * 4 * kBlock);
    p.clear_keep_blocks();
    for (uint64_t b = 0; b < 4; ++b) p.add_keep_blocks((number - 1) * 4 + b);
    return admin_->WritePart(p, four);
  };
  for (uint32_t n : {1, 2}) {
    auto r = part(n);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->kept_blocks(), 4u);
  }
  EXPECT_EQ(staging_->bytes(), 8 * kBlock);
  EXPECT_EQ(staging_->receiving(), 0u);
  // ...and the third part is not refused for them (they would stay until
  // the writer's close): the first kept blocks make room.
  auto third = part(3);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(third->kept_blocks(), 4u);
  EXPECT_EQ(staging_->bytes(), 8 * kBlock);
  EXPECT_EQ(staging_->dropped_blocks(), 4u);
  // Only parts being received make one wait.
  ASSERT_TRUE(staging_->Reserve(5 * kBlock).ok());
  EXPECT_EQ(staging_->Reserve(4 * kBlock).code(),
            absl::StatusCode::kResourceExhausted);
  staging_->Release(5 * kBlock);
  EXPECT_EQ(staging_->receiving(), 0u);
  v1::PublishWriteRequest discard;
  *discard.mutable_handle() = h;
  discard.set_discard(true);
  ASSERT_TRUE(admin_->PublishWrite(discard).ok());
  EXPECT_EQ(staging_->bytes(), 0u);
}

TEST_F(WritesTest, BlocksAnotherWorkerOwnsGoThereWhileThePartUploads) {
  const std::string data = Pattern(3 * kBlock, 7);
  v1::WriteHandle h = Begin("f.pt");
  v1::WritePartHeader header = Part(h, data.size());
  header.clear_keep_blocks();
  header.add_keep_blocks(0);
  (*header.mutable_forward())[1] = Address(peer_port_);
  // Not a worker of the ring: the worker sends it nothing (its own
  // credentials go with what it sends).
  (*header.mutable_forward())[2] = "127.0.0.1:1";
  auto r = admin_->WritePart(header, data);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kept_blocks(), 1u);
  ASSERT_EQ(r->kept_elsewhere().size(), 1u);
  EXPECT_EQ(r->kept_elsewhere().at(1), Address(peer_port_));
  EXPECT_EQ(staging_->bytes(), kBlock);
  EXPECT_EQ(peer_staging_->bytes(), kBlock);
  EXPECT_EQ(r->part().size(), data.size());  // Uploaded whole all the same.
  UploadedPart part{1, 0, data.size(), r->part().token()};
  auto info = Commit(h, {part});
  ASSERT_TRUE(info.ok()) << info.status();
  // Each publishes what it kept, as blocks of the committed version.
  v1::PublishWriteRequest pub;
  *pub.mutable_handle() = h;
  pub.set_version(info->version);
  pub.set_object_size(info->size);
  auto mine = admin_->PublishWrite(pub);
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(mine->published_blocks(), 1u);
  auto theirs = WorkerClient(Address(peer_port_), **ChannelFactory::Create([&] {
                               SecurityOptions so;
                               so.token_file = dir_.path() + "/admin";
                               return so;
                             }()))
                    .PublishWrite(pub);
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  EXPECT_EQ(theirs->published_blocks(), 1u);
  BlockId id{"/ckpt", "f.pt", info->version, 1, kBlock, info->size};
  std::shared_ptr<const Block> b = peer_blocks_->TryGetCached(id);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(std::string(b->data()), data.substr(kBlock, kBlock));
  id.index = 0;
  b = blocks_->TryGetCached(id);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(std::string(b->data()), data.substr(0, kBlock));
  id.index = 2;
  EXPECT_EQ(blocks_->TryGetCached(id), nullptr);
  EXPECT_EQ(peer_blocks_->TryGetCached(id), nullptr);
  // Forwarding needs a block of the part, not one kept here as well.
  header.clear_forward();
  (*header.mutable_forward())[0] = Address(peer_port_);
  EXPECT_EQ(admin_->WritePart(header, data).status().code(),
            absl::StatusCode::kInvalidArgument);
  header.clear_forward();
  (*header.mutable_forward())[3] = Address(peer_port_);
  EXPECT_EQ(admin_->WritePart(header, data).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(WritesTest, KeptBlocksAreSlicesOfTheirPartAllOrNone) {
  const v1::WriteHandle h = Begin("s.pt");
  auto part = std::make_shared<const std::string>(Pattern(2 * kBlock + 7, 5));
  // An index outside the part keeps nothing, nor do the others with it.
  EXPECT_EQ(staging_->Keep(h, part, 0, {0, 3}), 0u);
  EXPECT_EQ(staging_->Keep(h, part, kBlock, {0}), 0u);
  EXPECT_EQ(staging_->bytes(), 0u);
  EXPECT_EQ(staging_->writes(), 0u);
  EXPECT_EQ(staging_->Keep(h, part, 0, {0, 1, 2}), 3u);
  EXPECT_EQ(staging_->bytes(), part->size());
  // The same part again replaces its blocks; it is not counted twice.
  EXPECT_EQ(staging_->Keep(h, part, 0, {0, 1, 2}), 3u);
  EXPECT_EQ(staging_->bytes(), part->size());
  EXPECT_GT(part.use_count(), 1);  // Shared, not copied.
  // 6 blocks more do not fit the 8 of the budget: none of them is kept.
  auto six = std::make_shared<const std::string>(Pattern(6 * kBlock, 6));
  EXPECT_EQ(staging_->Keep(h, six, 3 * kBlock, {3, 4, 5, 6, 7, 8}), 0u);
  EXPECT_EQ(staging_->bytes(), part->size());
  EXPECT_EQ(six.use_count(), 1);
  // One write id with another upload's handle keeps nothing.
  v1::WriteHandle other = h;
  other.set_upload_id("another-upload");
  EXPECT_EQ(staging_->Keep(other, part, 0, {0}), 0u);
  other = h;
  other.set_relative("elsewhere.pt");
  EXPECT_EQ(staging_->Keep(other, part, 0, {0}), 0u);
  EXPECT_EQ(staging_->bytes(), part->size());
  // An empty object is one part of 0 bytes holding one empty block.
  const v1::WriteHandle e = Begin("empty.pt");
  EXPECT_EQ(staging_->Keep(e, std::make_shared<const std::string>(), 0, {0}),
            1u);
  staging_->Discard(h.write_id());
  staging_->Discard(e.write_id());
  EXPECT_EQ(staging_->bytes(), 0u);
  EXPECT_EQ(part.use_count(), 1);  // Freed with its last block.
}

// A writer that died sends nothing more: its kept blocks still go after
// max_age, with no part, publish or call of Expire to trigger it.
TEST_F(WritesTest, KeptBlocksOfAWriterThatDiedGoAfterTheirAge) {
  WriteStaging staging(blocks_.get(),
                       WriteStagingOptions{.max_bytes = 8 * kBlock,
                                           .max_age = absl::Milliseconds(200)});
  const v1::WriteHandle h = Begin("dead.pt");
  auto part = std::make_shared<const std::string>(Pattern(2 * kBlock, 3));
  ASSERT_EQ(staging.Keep(h, part, 0, {0, 1}), 2u);
  const absl::Time kept = absl::Now();
  EXPECT_EQ(staging.writes(), 1u);
  // The expiry thread forgets the write under its lock and frees the blocks
  // after it, so the part's last other owner goes a little after writes()
  // reads 0: wait for both.
  ASSERT_TRUE(testing::WaitFor(
      [&] { return staging.writes() == 0 && part.use_count() == 1; },
      absl::Seconds(5)));
  EXPECT_GE(absl::Now() - kept, absl::Milliseconds(200));
  EXPECT_EQ(staging.bytes(), 0u);
}

}  // namespace
}  // namespace larder
