// Copyright 2026 The Larder Authors.
//
// Writes through the cache (Client::Create, `larder cp LOCAL /cluster/...`)
// on the cluster of cluster_fixture.h: a writable s3:// mount and a
// writable file:// mount under /ckpt. Run plain and secure (a writer token
// limited to /ckpt).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "absl/strings/match.h"
#include "client/worker_client.h"
#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cluster_fixture.h"
#include "tests/testing/pki.h"
#include "tests/testing/process.h"

namespace larder {
namespace {

using ::testing::HasSubstr;
using testing::Pki;

class WriteTest : public ClusterTest {
 protected:
  std::vector<std::string> ExtraMasterFlags() override {
    return {"--write_max_age=3s", "--allowed_file_roots=" + dir_.path()};
  }
  std::vector<std::string> ExtraWorkerFlags() override {
    return {"--allowed_file_roots=" + dir_.path()};
  }

  void SetUp() override {
    ClusterTest::SetUp();
    if (HasFatalFailure()) return;
    root_ = dir_.path() + "/local";
    std::filesystem::create_directories(root_);
    ASSERT_TRUE(AddMount("/ckpt/s3", s3_->Uri("ckpt"), 60000, true));
    ASSERT_TRUE(AddMount("/ckpt/local", "file://" + root_, 60000, true));
    ASSERT_TRUE(AddMount("/scratch", s3_->Uri("scratch"), 60000, true));
    writer_ = Connect("writer-node", Role::kWriter);
    reader_ = Connect("reader-node");
    ASSERT_NE(writer_, nullptr);
    ASSERT_NE(reader_, nullptr);
  }

  // Writes `data` to `path` in pieces of random sizes.
  absl::StatusOr<FileInfo> Write(const std::string& path,
                                 const std::string& data,
                                 WriteOptions options = {}) {
    LARDER_ASSIGN_OR_RETURN(std::unique_ptr<Writer> w,
                            writer_->Create(path, options));
    std::mt19937 rng(static_cast<uint32_t>(data.size()));
    for (size_t at = 0; at < data.size();) {
      const size_t n =
          std::min<size_t>(data.size() - at, 1 + rng() % (3 << 20));
      LARDER_RETURN_IF_ERROR(w->Write(absl::string_view(data).substr(at, n)));
      at += n;
    }
    return w->Close();
  }

  absl::StatusOr<std::string> Read(Client& client, const std::string& path) {
    LARDER_ASSIGN_OR_RETURN(std::unique_ptr<File> f, client.Open(path));
    std::string out(f->info().size, '\0');
    LARDER_ASSIGN_OR_RETURN(size_t n, f->Read(0, absl::MakeSpan(out)));
    out.resize(n);
    return out;
  }

  double Misses() {
    double n = 0;
    for (auto& w : workers_)
      n += w->Metric("larder_worker_misses_total").value_or(0);
    return n;
  }

  bool Visible(Client& client, const std::string& path) {
    return client.Stat(path).ok();
  }

  // The uploads in progress the master records in its state directory.
  int Records() {
    std::error_code ec;
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(
             master_->state_dir() + "/writes", ec))
      n += e.path().extension() == ".textproto";
    return n;
  }

  // Starts `larder cp PIPE path` writing from a pipe that never ends, and
  // once its first part is uploading (a temporary file in the file://
  // mount's root) runs `before_kill` and kills it with SIGKILL.
  void KillCpMidUpload(
      const std::string& path,
      const std::function<void()>& before_kill = [] {}) {
    const std::string fifo = dir_.path() + "/pipe";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    std::string token;
    if (const Pki* pki = testing::SuitePki()) {
      token = absl::StrCat(" --token_file=", pki->writer_token_file(),
                           " --tls_ca_file=", pki->ca());
    }
    const std::string cmd = absl::StrCat(LARDER_CLI_BINARY, " cp ", fifo, " ",
                                         path, " --master=", master_->address(),
                                         token, " >/dev/null 2>&1");
    pid_t pid = ::fork();
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), nullptr);
      ::_exit(127);
    }
    ASSERT_GT(pid, 0);
    std::ofstream out(fifo, std::ios::binary);
    const std::string chunk = PatternBytes(12 << 20, 5);
    out.write(chunk.data(), chunk.size());
    out.flush();
    const bool uploading = testing::WaitFor(
        [&] {
          for (const auto& e : std::filesystem::directory_iterator(root_))
            if (absl::StrContains(e.path().string(), ".larder-upload-"))
              return true;
          return false;
        },
        absl::Seconds(10));
    before_kill();
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ASSERT_TRUE(uploading) << "no part of " << path << " was uploading";
  }

  testing::TempDir dir_;
  std::string root_;
  std::unique_ptr<Client> writer_, reader_;
};

TEST_F(WriteTest, RoundTripOnEveryBackendIsServedFromTheCache) {
  for (const std::string mount : {"/ckpt/s3", "/ckpt/local"}) {
    for (size_t size : {size_t{0}, size_t{1}, size_t{(1 << 20) + 3},
                        size_t{(12 << 20) + 5}}) {
      SCOPED_TRACE(absl::StrCat(mount, " ", size, " bytes"));
      const std::string path = absl::StrCat(mount, "/run1/step-", size, ".pt");
      const std::string data = PatternBytes(size, static_cast<int>(size % 97));
      absl::StatusOr<FileInfo> info = Write(path, data);
      ASSERT_TRUE(info.ok()) << info.status();
      EXPECT_EQ(info->size, size);
      EXPECT_FALSE(info->version.empty());
      // Another node reads it: every block from the workers' memory.
      const double misses = Misses();
      absl::StatusOr<std::string> back = Read(*reader_, path);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_TRUE(*back == data) << "bytes differ";
      EXPECT_EQ(Misses(), misses) << "the read went to the under-store";
    }
  }
  // The file:// mount holds the file itself, and no upload left behind.
  std::ifstream f(root_ + "/run1/step-12582917.pt", std::ios::binary);
  std::string on_disk((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(on_disk.size(), size_t{(12 << 20) + 5});
  for (const auto& e : std::filesystem::directory_iterator(root_ + "/run1"))
    EXPECT_FALSE(absl::StrContains(e.path().string(), ".larder-upload-"));
}

TEST_F(WriteTest, NothingVisibleUntilCloseAndNothingAfterAbort) {
  const std::string path = "/ckpt/s3/partial.pt";
  auto w = writer_->Create(path);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->Write(PatternBytes(7 << 20, 3)).ok());
  EXPECT_FALSE(Visible(*reader_, path));
  auto listed = reader_->List("/ckpt/s3");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(listed->entries.empty());
  ASSERT_TRUE((*w)->Abort().ok());
  EXPECT_FALSE(Visible(*writer_, path));
  // A writer dropped without Close aborts too.
  {
    auto dropped = writer_->Create("/ckpt/local/dropped.pt");
    ASSERT_TRUE(dropped.ok()) << dropped.status();
    ASSERT_TRUE((*dropped)->Write(PatternBytes(6 << 20, 4)).ok());
  }
  EXPECT_FALSE(Visible(*writer_, "/ckpt/local/dropped.pt"));
  for (const auto& e : std::filesystem::directory_iterator(root_))
    ADD_FAILURE() << "left behind: " << e.path();
}

TEST_F(WriteTest, AnotherNodeSeesTheNewFileAndOverwritesOnlyWhenAsked) {
  const std::string path = "/ckpt/s3/latest.pt";
  // The reader's cache holds the directory (empty) and the path (absent).
  ASSERT_TRUE(reader_->ListDir("/ckpt/s3").ok());
  EXPECT_FALSE(Visible(*reader_, path));
  ASSERT_TRUE(Write(path, PatternBytes(3 << 20, 1)).ok());
  // The commit's invalidation reaches it with the ring (every 200 ms here).
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        auto d = reader_->ListDir("/ckpt/s3");
        return d.ok() && (*d)->size() == 1 && Visible(*reader_, path);
      },
      absl::Seconds(5)));
  ASSERT_TRUE(Read(*reader_, path).ok());
  // Once there, replacing it must be asked for.
  absl::StatusOr<FileInfo> again = Write(path, PatternBytes(1 << 20, 2));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists)
      << again.status();
  WriteOptions o;
  o.overwrite = true;
  const std::string v2 = PatternBytes((2 << 20) + 11, 2);
  ASSERT_TRUE(Write(path, v2, o).ok());
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        auto back = Read(*reader_, path);
        return back.ok() && *back == v2;
      },
      absl::Seconds(5)));
  // Where a directory is, or at a mount's root: no.
  EXPECT_EQ(Write("/ckpt/s3", "x").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(WriteTest, OnlyWritersOfWritableMountsWrite) {
  // A mount that is not writable.
  absl::StatusOr<FileInfo> ro = Write("/datasets/ds/new.bin", "data");
  EXPECT_EQ(ro.status().code(), absl::StatusCode::kPermissionDenied)
      << ro.status();
  EXPECT_THAT(ro.status().message(), HasSubstr("not writable"));
  if (testing::SuitePki() == nullptr) return;  // Plain: the local admin.
  // A reader token.
  auto r = reader_->Create("/ckpt/s3/by-reader.pt");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied)
      << r.status();
  // A writer token outside its mounts.
  absl::StatusOr<FileInfo> out = Write("/scratch/x.pt", "data");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kPermissionDenied)
      << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("/ckpt"));
}

TEST_F(WriteTest, AKilledWorkerCostsNoVisiblePartialObject) {
  const std::string path = "/ckpt/s3/survivor.pt";
  const std::string data = PatternBytes(30 << 20, 9);
  auto w = writer_->Create(path);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->Write(absl::string_view(data).substr(0, 10 << 20)).ok());
  workers_[1]->Kill();
  ASSERT_TRUE((*w)->Write(absl::string_view(data).substr(10 << 20)).ok());
  absl::StatusOr<FileInfo> info = (*w)->Close();
  if (info.ok()) {
    absl::StatusOr<std::string> back = Read(*reader_, path);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == data);
  } else {
    EXPECT_FALSE(Visible(*writer_, path)) << info.status();
  }
}

TEST_F(WriteTest, WorkersRefuseMalformedParts) {
  // A real upload's handle, then parts that lie about themselves.
  v1::BeginWriteRequest begin;
  begin.set_path("/ckpt/s3/malformed.pt");
  v1::BeginWriteResponse started;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->BeginWrite(&ctx, begin, &started).ok());
  }
  WorkerClient worker(workers_[0]->address(),
                      *testing::SuiteChannels(Role::kAdmin));
  const std::string data = PatternBytes(kBlock + 5, 1);
  auto part = [&](auto edit) {
    v1::WritePartHeader h;
    *h.mutable_handle() = started.handle();
    h.set_number(1);
    h.set_size(data.size());
    h.set_upload(true);
    h.add_keep_blocks(0);
    h.add_keep_blocks(1);
    edit(h);
    return worker.WritePart(h, data).status();
  };
  using H = v1::WritePartHeader;
  EXPECT_EQ(part([](H& h) { h.set_offset(7); }).code(),
            absl::StatusCode::kInvalidArgument);  // Not at a block.
  EXPECT_EQ(part([](H& h) { h.set_size(100); }).code(),
            absl::StatusCode::kInvalidArgument);  // More data than said.
  EXPECT_EQ(part([&](H& h) { h.set_size(data.size() + 1); }).code(),
            absl::StatusCode::kInvalidArgument);  // Less.
  EXPECT_EQ(part([](H& h) { h.add_keep_blocks(9); }).code(),
            absl::StatusCode::kInvalidArgument);  // A block elsewhere.
  EXPECT_EQ(part([](H& h) { h.set_number(0); }).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(part([](H& h) { h.set_offset(UINT64_MAX - kBlock + 1); }).code(),
            absl::StatusCode::kInvalidArgument);  // Past the end of numbers.
  EXPECT_EQ(part([](H& h) { h.mutable_handle()->set_block_size(4096); }).code(),
            absl::StatusCode::kInvalidArgument);  // Not the mount's.
  EXPECT_EQ(
      part([](H& h) { h.mutable_handle()->set_mount("/datasets/ds"); }).code(),
      absl::StatusCode::kPermissionDenied);  // Not writable.
  EXPECT_EQ(part([](H& h) { h.mutable_handle()->set_mount("/nope"); }).code(),
            absl::StatusCode::kNotFound);
  if (testing::SuitePki() != nullptr) {
    WorkerClient as_reader(workers_[0]->address(),
                           *testing::SuiteChannels(Role::kReader));
    v1::WritePartHeader h;
    *h.mutable_handle() = started.handle();
    h.set_number(1);
    h.set_size(data.size());
    EXPECT_EQ(as_reader.WritePart(h, data).status().code(),
              absl::StatusCode::kPermissionDenied);
  }
  // The master takes only the parts of a real object: a gap is refused.
  v1::CommitWriteRequest commit;
  *commit.mutable_handle() = started.handle();
  v1::UploadedPart* p = commit.add_parts();
  p->set_number(2);
  p->set_offset(0);
  p->set_size(data.size());
  v1::CommitWriteResponse committed;
  {
    grpc::ClientContext ctx;
    grpc::Status st = stub_->CommitWrite(&ctx, commit, &committed);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << st.error_message();
  }
  // Nor a handle it did not give.
  v1::CommitWriteRequest forged = commit;
  forged.mutable_handle()->set_relative("elsewhere.pt");
  forged.mutable_parts(0)->set_number(1);
  {
    grpc::ClientContext ctx;
    EXPECT_EQ(stub_->CommitWrite(&ctx, forged, &committed).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  v1::AbortWriteRequest abort;
  *abort.mutable_handle() = started.handle();
  v1::AbortWriteResponse aborted;
  grpc::ClientContext ctx;
  EXPECT_TRUE(stub_->AbortWrite(&ctx, abort, &aborted).ok());
  EXPECT_FALSE(Visible(*writer_, "/ckpt/s3/malformed.pt"));
}

TEST_F(WriteTest, TheMasterAbortsAnUploadItsWriterLeft) {
  KillCpMidUpload("/ckpt/local/killed.pt");
  EXPECT_FALSE(Visible(*writer_, "/ckpt/local/killed.pt"));
  // After --write_max_age (3 s), the master aborts the upload, then drops
  // its record: a moment after the store's files go (a check of the record
  // as soon as the files were gone saw it still there once).
  EXPECT_TRUE(testing::WaitFor(
      [&] { return std::filesystem::is_empty(root_) && Records() == 0; },
      absl::Seconds(10)));
  EXPECT_TRUE(std::filesystem::is_empty(root_));
  EXPECT_FALSE(Visible(*writer_, "/ckpt/local/killed.pt"));
  EXPECT_EQ(Records(), 0);
}

TEST_F(WriteTest, AMasterThatRestartsStillAbortsUploadsLeftBeforeIt) {
  // The master dies first, then the writer: nobody is left to abort.
  KillCpMidUpload("/ckpt/local/orphan.pt", [&] { master_->Kill(9); });
  EXPECT_EQ(Records(), 1);
  absl::SleepFor(absl::Seconds(4));  // Past --write_max_age.
  EXPECT_FALSE(std::filesystem::is_empty(root_));
  // The restarted master reads the record, aborts the upload, then drops
  // the record (a moment after the store's files go: fresh-clone CI saw 1).
  ASSERT_TRUE(master_->Restart().ok());
  EXPECT_TRUE(testing::WaitFor(
      [&] { return std::filesystem::is_empty(root_) && Records() == 0; },
      absl::Seconds(10)));
  EXPECT_TRUE(std::filesystem::is_empty(root_));
  EXPECT_EQ(Records(), 0);
  EXPECT_FALSE(Visible(*writer_, "/ckpt/local/orphan.pt"));
}

// Uploads that live long enough for a master restart.
class LongWriteTest : public WriteTest {
 protected:
  std::vector<std::string> ExtraMasterFlags() override {
    return {"--write_max_age=10m", "--allowed_file_roots=" + dir_.path()};
  }
};

TEST_F(LongWriteTest, AWriteBegunBeforeAMasterRestartCommitsAfterIt) {
  const std::string path = "/ckpt/s3/restarted.pt";
  const std::string data = PatternBytes((24 << 20) + 7, 11);
  auto w = writer_->Create(path);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->Write(absl::string_view(data).substr(0, 12 << 20)).ok());
  EXPECT_EQ(Records(), 1);
  ASSERT_TRUE(master_->Restart().ok());
  ASSERT_TRUE(WaitForWorkers(3));
  absl::Status st = (*w)->Write(absl::string_view(data).substr(12 << 20));
  ASSERT_TRUE(st.ok()) << st;
  absl::StatusOr<FileInfo> info = (*w)->Close();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->size, data.size());
  EXPECT_EQ(Records(), 0);
  absl::StatusOr<std::string> back = Read(*reader_, path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == data);
}

TEST_F(WriteTest, CpWritesFilesAndDirectories) {
  const std::string src = dir_.path() + "/src";
  std::filesystem::create_directories(src + "/shards");
  std::map<std::string, std::string> files = {
      {"shards/rank-0.pt", PatternBytes(6 << 20, 1)},
      {"shards/rank-1.pt", PatternBytes(1234, 2)},
      {"meta.json", "{}"}};
  for (const auto& [rel, data] : files) {
    std::ofstream(src + "/" + rel, std::ios::binary) << data;
  }
  // Links are followed, and each file is named by its own path (it used to
  // be named by its link's target: latest.pt went up as shards/rank-0.pt
  // again); a link to a parent directory is not walked in a loop.
  std::filesystem::create_symlink("shards/rank-0.pt", src + "/latest.pt");
  files["latest.pt"] = files["shards/rank-0.pt"];
  std::filesystem::create_directories(dir_.path() + "/elsewhere");
  std::ofstream(dir_.path() + "/elsewhere/vocab.json") << "[1, 2]";
  std::filesystem::create_directory_symlink("../elsewhere", src + "/tokenizer");
  files["tokenizer/vocab.json"] = "[1, 2]";
  std::filesystem::create_directory_symlink("..", src + "/shards/up");
  std::string token;
  if (const Pki* pki = testing::SuitePki()) {
    token = absl::StrCat(" --token_file=", pki->writer_token_file(),
                         " --tls_ca_file=", pki->ca());
  }
  testing::Shell sh = testing::Sh(absl::StrCat(
      LARDER_CLI_BINARY, " cp ", src,
      " /ckpt/s3/step-7 --master=", master_->address(), token, " 2>&1"));
  ASSERT_EQ(sh.code, 0) << sh.out;
  EXPECT_THAT(sh.out, HasSubstr("wrote 5 files"));
  for (const auto& [rel, data] : files) {
    absl::StatusOr<std::string> back = Read(*reader_, "/ckpt/s3/step-7/" + rel);
    ASSERT_TRUE(back.ok()) << rel << ": " << back.status();
    EXPECT_TRUE(*back == data) << rel;
  }
  // Again: the objects exist.
  sh = testing::Sh(absl::StrCat(
      LARDER_CLI_BINARY, " cp ", src,
      " /ckpt/s3/step-7 --master=", master_->address(), token, " 2>&1"));
  EXPECT_NE(sh.code, 0);
  EXPECT_THAT(sh.out, HasSubstr("exists"));

  // A link to nothing is named, and nothing is copied.
  const std::string broken = dir_.path() + "/broken";
  std::filesystem::create_directories(broken);
  std::ofstream(broken + "/a.pt") << "a";
  std::filesystem::create_symlink("gone.pt", broken + "/latest.pt");
  sh = testing::Sh(absl::StrCat(
      LARDER_CLI_BINARY, " cp ", broken,
      " /ckpt/s3/broken --master=", master_->address(), token, " 2>&1"));
  EXPECT_NE(sh.code, 0);
  EXPECT_THAT(sh.out, HasSubstr("latest.pt: a symbolic link to nothing"));
  EXPECT_FALSE(Visible(*reader_, "/ckpt/s3/broken/a.pt"));
}

// A directory of mounts (/ckpt holds the mounts /ckpt/s3 and /ckpt/local;
// / holds /ckpt and /scratch) is copied whole: the master lists it as its
// mounts, not what they hold, and cp used to copy nothing, with exit 0.
TEST_F(WriteTest, CpOfADirectoryOfMountsCopiesEveryMount) {
  const std::string a = PatternBytes(5000, 1), b = PatternBytes(7000, 2);
  ASSERT_TRUE(Write("/ckpt/s3/run/a.pt", a).ok());
  ASSERT_TRUE(Write("/ckpt/local/run/b.pt", b).ok());
  std::string token;
  if (const Pki* pki = testing::SuitePki()) {
    token = absl::StrCat(" --token_file=", pki->reader_token_file(),
                         " --tls_ca_file=", pki->ca());
  }
  for (const std::string from : {"/ckpt", "/"}) {
    SCOPED_TRACE(from);
    const std::string out =
        absl::StrCat(dir_.path(), "/out", from == "/" ? "-root" : "");
    testing::Shell sh = testing::Sh(
        absl::StrCat(LARDER_CLI_BINARY, " cp ", from, " ", out,
                     " --master=", master_->address(), token, " 2>&1"));
    ASSERT_EQ(sh.code, 0) << sh.out;
    // "/" holds the dataset of the cluster's fixture, /datasets/ds, too.
    EXPECT_THAT(sh.out, HasSubstr(absl::StrCat(
                            "copied ", 2 + (from == "/" ? files_.size() : 0),
                            " files")));
    if (from == "/") {
      for (const auto& [path, data] : files_) {
        absl::StatusOr<std::string> got =
            testing::ReadFile(absl::StrCat(out, "/datasets/ds/", path));
        ASSERT_TRUE(got.ok()) << path << ": " << got.status();
        EXPECT_TRUE(*got == data) << path;
      }
    }
    const std::string under = from == "/" ? out + "/ckpt" : out;
    absl::StatusOr<std::string> got_a =
        testing::ReadFile(under + "/s3/run/a.pt");
    absl::StatusOr<std::string> got_b =
        testing::ReadFile(under + "/local/run/b.pt");
    ASSERT_TRUE(got_a.ok() && got_b.ok()) << sh.out;
    EXPECT_TRUE(*got_a == a);
    EXPECT_TRUE(*got_b == b);
  }
}

}  // namespace
}  // namespace larder
