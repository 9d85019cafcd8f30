// Copyright 2026 The Larder Authors.
//
// `larder csi` against a real cluster and a real `larder fuse` mount, spoken
// to over its unix socket with the CSI messages, as the kubelet would: a
// published path reads byte-exact at the target, read-only; publish and
// unpublish are idempotent; the errors the CSI spec names (NotFound,
// InvalidArgument, AlreadyExists, FailedPrecondition while the FUSE daemon is
// down).
#include <errno.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "csi/node_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/csi.grpc.pb.h"
#include "tests/testing/process.h"
#include "tests/testing/worker_process.h"

namespace larder {
namespace {

using ::testing::HasSubstr;

class CsiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 20; ++i) {
      const std::string rel = absl::StrCat("sub/c", i % 3, "/f", i, ".bin");
      const std::string data = testing::PatternBytes(1000 + 7919 * i, i);
      ASSERT_TRUE(testing::WriteFile(data_.path() + "/ds/" + rel, data).ok());
      files_[rel] = data;
    }
    ASSERT_TRUE(testing::WriteFile(data_.path() + "/ds/top.txt", "top\n").ok());
    auto master = testing::MasterProcess::Start(
        {absl::StrCat("--allowed_file_roots=", data_.path())});
    ASSERT_TRUE(master.ok()) << master.status();
    master_ = *std::move(master);
    auto worker = testing::WorkerProcess::Start(
        {absl::StrCat("--master=", master_->address()),
         absl::StrCat("--allowed_file_roots=", data_.path())});
    ASSERT_TRUE(worker.ok()) << worker.status();
    worker_ = *std::move(worker);
    testing::Shell r = testing::Sh(
        absl::StrCat(LARDER_CLI_BINARY, " mount /ds file://", data_.path(),
                     "/ds --master=", master_->address()));
    ASSERT_EQ(r.code, 0) << r.out;
    StartFuse({});
    socket_ = dir_.path() + "/csi.sock";
    ASSERT_TRUE(csi_.Start({LARDER_CLI_BINARY, "csi",
                            absl::StrCat("--csi_endpoint=unix://", socket_),
                            absl::StrCat("--fuse_mountpoint=", mnt()),
                            "--csi_node_id=node-a", "--csi_allowed_paths=/ds"},
                           dir_.path() + "/csi.log")
                    .ok());
    ASSERT_TRUE(
        testing::WaitFor([&] { return ::access(socket_.c_str(), F_OK) == 0; },
                         absl::Seconds(20)))
        << Log();
    auto channel = grpc::CreateChannel("unix://" + socket_,
                                       grpc::InsecureChannelCredentials());
    node_ = csi::v1::Node::NewStub(channel);
    identity_ = csi::v1::Identity::NewStub(channel);
    // The socket file is there from bind(), a moment before the plugin
    // listens: a call in between is refused (a fresh-clone CI run saw
    // IdentityAndNodeInfo's first call fail so). Every test starts once the
    // plugin answers.
    grpc::ClientContext ready;
    ready.set_wait_for_ready(true);
    ready.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(20));
    csi::v1::ProbeResponse probe;
    grpc::Status up = identity_->Probe(&ready, csi::v1::ProbeRequest(), &probe);
    ASSERT_TRUE(up.ok()) << up.error_message() << Log();
  }

  void TearDown() override {
    // Whatever a failed test left published.
    for (const std::string& t : targets_) {
      for (int i = 0; i < 4 && testing::IsMounted(t); ++i)
        testing::ForceUnmount(t);
    }
    for (const std::string& d : shared_dirs_) {
      for (int i = 0; i < 4 && testing::IsMounted(d); ++i)
        testing::ForceUnmount(d);
    }
  }

  void StartFuse(std::vector<std::string> flags) {
    fuse_.reset();
    auto fuse = testing::FuseProcess::Start(master_->address(), flags);
    ASSERT_TRUE(fuse.ok()) << fuse.status();
    fuse_ = *std::move(fuse);
  }

  std::string mnt() const { return fuse_->mountpoint(); }
  std::string Log() const {
    return testing::ReadFile(dir_.path() + "/csi.log").value_or("");
  }

  std::string Target(const std::string& name) {
    // The kubelet makes the parent; the plugin makes the target.
    const std::string parent = dir_.path() + "/pods/" + name;
    ::mkdir((dir_.path() + "/pods").c_str(), 0755);
    ::mkdir(parent.c_str(), 0755);
    targets_.push_back(parent + "/mount");
    return parent + "/mount";
  }

  grpc::Status Publish(const std::string& target, const std::string& path,
                       bool block = false, bool ephemeral = false) {
    csi::v1::NodePublishVolumeRequest req;
    req.set_volume_id("vol-" + path);
    req.set_target_path(target);
    auto* cap = req.mutable_volume_capability();
    if (block) {
      cap->mutable_block();
    } else {
      cap->mutable_mount();
    }
    cap->mutable_access_mode()->set_mode(
        csi::v1::VolumeCapability::AccessMode::MULTI_NODE_READER_ONLY);
    req.set_readonly(true);
    if (!path.empty()) (*req.mutable_volume_context())["path"] = path;
    (*req.mutable_volume_context())["csi.storage.k8s.io/ephemeral"] =
        ephemeral ? "true" : "false";
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(30));
    ctx.set_wait_for_ready(true);  // The socket may be bound before it serves.
    csi::v1::NodePublishVolumeResponse resp;
    return node_->NodePublishVolume(&ctx, req, &resp);
  }

  grpc::Status Unpublish(const std::string& target) {
    csi::v1::NodeUnpublishVolumeRequest req;
    req.set_volume_id("vol");
    req.set_target_path(target);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(30));
    ctx.set_wait_for_ready(true);
    csi::v1::NodeUnpublishVolumeResponse resp;
    return node_->NodeUnpublishVolume(&ctx, req, &resp);
  }

  // How many mounts /proc/self/mountinfo has at `path`.
  int MountsAt(const std::string& path) {
    auto mounts = ReadMountInfo("/proc/self/mountinfo");
    EXPECT_TRUE(mounts.ok()) << mounts.status();
    int n = 0;
    for (const MountInfo& m : mounts.value_or(std::vector<MountInfo>{})) {
      n += m.mount_point == path;
    }
    return n;
  }

  testing::TempDir data_, dir_;
  std::map<std::string, std::string> files_;
  std::unique_ptr<testing::MasterProcess> master_;
  std::unique_ptr<testing::WorkerProcess> worker_;
  std::unique_ptr<testing::FuseProcess> fuse_;
  testing::Subprocess csi_;
  std::string socket_;
  std::unique_ptr<csi::v1::Node::Stub> node_;
  std::unique_ptr<csi::v1::Identity::Stub> identity_;
  std::vector<std::string> targets_;
  std::vector<std::string> shared_dirs_;
};

TEST_F(CsiTest, IdentityAndNodeInfo) {
  grpc::ClientContext c1, c2, c3, c4, c5;
  csi::v1::GetPluginInfoResponse info;
  ASSERT_TRUE(
      identity_->GetPluginInfo(&c1, csi::v1::GetPluginInfoRequest(), &info)
          .ok());
  EXPECT_EQ(info.name(), "csi.larder.io");
  EXPECT_FALSE(info.vendor_version().empty());
  csi::v1::GetPluginCapabilitiesResponse caps;
  ASSERT_TRUE(identity_
                  ->GetPluginCapabilities(
                      &c2, csi::v1::GetPluginCapabilitiesRequest(), &caps)
                  .ok());
  EXPECT_EQ(caps.capabilities_size(), 0);  // No controller service.
  csi::v1::ProbeResponse probe;
  ASSERT_TRUE(identity_->Probe(&c3, csi::v1::ProbeRequest(), &probe).ok());
  EXPECT_TRUE(probe.ready().value());
  csi::v1::NodeGetInfoResponse node;
  ASSERT_TRUE(
      node_->NodeGetInfo(&c4, csi::v1::NodeGetInfoRequest(), &node).ok());
  EXPECT_EQ(node.node_id(), "node-a");
  csi::v1::NodeStageVolumeResponse staged;
  csi::v1::NodeStageVolumeRequest stage;
  stage.set_volume_id("v");
  EXPECT_EQ(node_->NodeStageVolume(&c5, stage, &staged).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(CsiTest, PublishReadsEveryByteReadOnlyAndBothCallsAreIdempotent) {
  const std::string target = Target("pod-1");
  grpc::Status st = Publish(target, "/ds/sub");
  ASSERT_TRUE(st.ok()) << st.error_message() << Log();
  for (const auto& [rel, data] : files_) {
    auto got = testing::ReadAll(target + "/" + rel.substr(4));  // "sub/"
    ASSERT_TRUE(got.ok()) << rel << ": " << got.status();
    EXPECT_EQ(*got, data) << rel;
  }
  EXPECT_FALSE(testing::ReadFile(target + "/top.txt").ok());  // Not below.
  // The mount itself is read-only, nosuid, nodev (not only the daemon's
  // EROFS for a mount that takes no writes).
  struct statvfs vfs;
  ASSERT_EQ(::statvfs(target.c_str(), &vfs), 0) << std::strerror(errno);
  EXPECT_TRUE(vfs.f_flag & ST_RDONLY);
  EXPECT_TRUE(vfs.f_flag & ST_NOSUID);
  EXPECT_TRUE(vfs.f_flag & ST_NODEV);
  // Read-only: a write fails with EROFS (the bind is remounted ro).
  const int fd =
      ::open((target + "/new.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = errno;
  EXPECT_EQ(fd, -1);
  if (fd >= 0) ::close(fd);
  EXPECT_EQ(err, EROFS) << std::strerror(err);

  // Again, the same path to the same target: OK, still one mount.
  st = Publish(target, "/ds/sub");
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(MountsAt(target), 1);
  // Another path to that target: AlreadyExists.
  st = Publish(target, "/ds");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::ALREADY_EXISTS)
      << st.error_message();
  EXPECT_EQ(MountsAt(target), 1);
  // The same path to a second target (a second pod): its own mount.
  const std::string other = Target("pod-2");
  ASSERT_TRUE(Publish(other, "/ds").ok());
  auto top = testing::ReadAll(other + "/top.txt");
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_EQ(*top, "top\n");

  // Unpublish: unmounted and the directory gone; again: OK.
  st = Unpublish(target);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(MountsAt(target), 0);
  struct stat sb;
  EXPECT_NE(::stat(target.c_str(), &sb), 0);
  st = Unpublish(target);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(Unpublish(other).ok());
  EXPECT_EQ(MountsAt(other), 0);
  EXPECT_THAT(Log(), HasSubstr("csi.published"));
}

// As on a node: the plugin in a mount namespace of its own (its container),
// the targets in a directory shared with the host's namespace (the kubelet's
// pods directory, Bidirectional). The copy that reaches the host (and the
// pod) is read-only too, and goes with the unpublish.
TEST_F(CsiTest, TheCopyThatPropagatesToTheHostIsReadOnly) {
  const std::string shared = dir_.path() + "/shared-pods";
  ASSERT_EQ(::mkdir(shared.c_str(), 0755), 0);
  shared_dirs_.push_back(shared);
  testing::Shell r =
      testing::Sh(absl::StrCat("mount --bind ", shared, " ", shared,
                               " && mount --make-shared ", shared));
  ASSERT_EQ(r.code, 0) << r.out;
  testing::Subprocess csi3;
  const std::string sock3 = dir_.path() + "/csi3.sock";
  ASSERT_TRUE(csi3.Start({"unshare", "-m", "--propagation", "unchanged",
                          LARDER_CLI_BINARY, "csi",
                          absl::StrCat("--csi_endpoint=unix://", sock3),
                          absl::StrCat("--fuse_mountpoint=", mnt())},
                         dir_.path() + "/csi3.log")
                  .ok());
  ASSERT_TRUE(testing::WaitFor(
      [&] { return ::access(sock3.c_str(), F_OK) == 0; }, absl::Seconds(20)));
  node_ = csi::v1::Node::NewStub(grpc::CreateChannel(
      "unix://" + sock3, grpc::InsecureChannelCredentials()));
  const std::string target = shared + "/pod-x";
  targets_.push_back(target);
  grpc::Status st = Publish(target, "/ds/sub");
  ASSERT_TRUE(st.ok()) << st.error_message();
  // Here, in the test's namespace: the propagated copy.
  ASSERT_EQ(MountsAt(target), 1);
  struct statvfs vfs;
  ASSERT_EQ(::statvfs(target.c_str(), &vfs), 0) << std::strerror(errno);
  EXPECT_TRUE(vfs.f_flag & ST_RDONLY);
  EXPECT_TRUE(vfs.f_flag & ST_NOSUID);
  EXPECT_TRUE(vfs.f_flag & ST_NODEV);
  auto got = testing::ReadAll(target + "/c1/f1.bin");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, files_["sub/c1/f1.bin"]);
  st = Unpublish(target);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(MountsAt(target), 0);
}

TEST_F(CsiTest, BadRequestsGetTheErrorsTheSpecNames) {
  const std::string target = Target("pod-bad");
  EXPECT_EQ(Publish(target, "/ds/no-such-dir").error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Publish(target, "/ds/sub/c0/no/deeper").error_code(),
            grpc::StatusCode::NOT_FOUND);
  grpc::Status st = Publish(target, "/ds/../../etc");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr(".."));
  st = Publish(target, "");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("path"));
  EXPECT_EQ(Publish(target, "ds/sub").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Publish(target, "/ds/top.txt").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);  // A file.
  EXPECT_EQ(Publish(target, "/ds/sub", /*block=*/true).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Publish("relative/target", "/ds/sub").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Unpublish("").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Policy: paths outside --csi_allowed_paths=/ds (a prefix by component),
  // and inline volumes, which are off by default.
  st = Publish(target, "/");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(st.error_message(), HasSubstr("--csi_allowed_paths"));
  EXPECT_EQ(Publish(target, "/dsx").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  st = Publish(target, "/ds/sub", /*block=*/false, /*ephemeral=*/true);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(st.error_message(), HasSubstr("inline"));
  EXPECT_EQ(MountsAt(target), 0);  // Nothing was mounted by any of them.
}

TEST_F(CsiTest, PublishWhileTheFuseDaemonIsDownFailsWithFailedPrecondition) {
  const std::string target = Target("pod-down");
  // A daemon killed without auto-unmount: the mount stays, dead (ENOTCONN).
  StartFuse({"--auto_unmount=false"});
  // That daemon has a mount point of its own: a second plugin serves it.
  testing::Subprocess csi2;
  const std::string sock2 = dir_.path() + "/csi2.sock";
  ASSERT_TRUE(csi2.Start({LARDER_CLI_BINARY, "csi",
                          absl::StrCat("--csi_endpoint=unix://", sock2),
                          absl::StrCat("--fuse_mountpoint=", mnt())},
                         dir_.path() + "/csi2.log")
                  .ok());
  ASSERT_TRUE(testing::WaitFor(
      [&] { return ::access(sock2.c_str(), F_OK) == 0; }, absl::Seconds(20)));
  node_ = csi::v1::Node::NewStub(grpc::CreateChannel(
      "unix://" + sock2, grpc::InsecureChannelCredentials()));
  identity_ = csi::v1::Identity::NewStub(grpc::CreateChannel(
      "unix://" + sock2, grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(Publish(target, "/ds/sub").ok());
  ASSERT_TRUE(Unpublish(target).ok());

  fuse_->Kill(9);
  grpc::Status st = Publish(target, "/ds/sub");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("daemon is down"));
  grpc::ClientContext c;
  csi::v1::ProbeResponse probe;
  ASSERT_TRUE(identity_->Probe(&c, csi::v1::ProbeRequest(), &probe).ok());
  EXPECT_FALSE(probe.ready().value());

  // No FUSE mount at all (unmounted): FailedPrecondition too.
  testing::ForceUnmount(mnt());
  st = Publish(target, "/ds/sub");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("no FUSE mount"));
  EXPECT_EQ(MountsAt(target), 0);

  // Back: the daemon restarted on the same mount point serves again.
  ASSERT_TRUE(fuse_->Restart().ok());
  st = Publish(target, "/ds/sub");
  EXPECT_TRUE(st.ok()) << st.error_message();
  {
    auto got = testing::ReadAll(target + "/c0/f0.bin");
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, files_["sub/c0/f0.bin"]);
  }

  // A pod's mount made before the daemon died is dead (ENOTCONN) after it
  // restarts: publishing it again replaces it with a live one.
  fuse_->Kill(9);
  ASSERT_TRUE(fuse_->Restart().ok());
  struct statvfs vfs;
  EXPECT_NE(::statvfs(target.c_str(), &vfs), 0);  // Stale.
  st = Publish(target, "/ds/sub");
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(MountsAt(target), 1);
  {
    auto got = testing::ReadAll(target + "/c0/f0.bin");
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, files_["sub/c0/f0.bin"]);
  }
  EXPECT_TRUE(Unpublish(target).ok());
  EXPECT_EQ(MountsAt(target), 0);
}

}  // namespace
}  // namespace larder
