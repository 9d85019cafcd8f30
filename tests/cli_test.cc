// Copyright 2026 The Larder Authors.
//
// The `larder` binary as a user runs it: exit codes, clear messages, and a
// copy of a dataset out of a real s3rver.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"
#include "tests/testing/s3rver.h"
#include "tests/testing/worker_process.h"
#include "understore/factory.h"
#include "understore/s3_store.h"

namespace larder {
namespace {

using ::testing::HasSubstr;

struct CliResult {
  int exit_code;
  std::string output;  // stdout + stderr
};

CliResult RunLarder(const std::string& args, const std::string& env = "") {
  std::string cmd =
      absl::StrCat(env, " ", LARDER_CLI_BINARY, " ", args, " 2>&1");
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(CliTest, UsageAndUnknownCommand) {
  EXPECT_EQ(RunLarder("").exit_code, 2);
  CliResult r = RunLarder("frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("unknown command 'frobnicate'"));
  r = RunLarder("store --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("larder store copy URI DEST_DIR"));
}

TEST(CliTest, ClearErrorsAndExitCodes) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::WriteFile(dir.path() + "/a.txt", "abc").ok());
  CliResult r = RunLarder("store ls not-a-uri");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("bad under-store URI"));
  r = RunLarder(absl::StrCat("store stat file://", dir.path(), " missing.txt"));
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.output, HasSubstr("NOT_FOUND"));
  r = RunLarder(
      absl::StrCat("store cat file://", dir.path(), " ../etc/passwd"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("inside the store root"));
  r = RunLarder(absl::StrCat("store cat file://", dir.path(), " a.txt"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "abc");
  r = RunLarder(
      absl::StrCat("store ls s3://bucket/x?endpoint=http://127.0.0.1:",
                   testing::PickFreePort(), " --retry_max_attempts=2"),
      "AWS_ACCESS_KEY_ID=AKIDCLITEST AWS_SECRET_ACCESS_KEY=CliSecretValue99");
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_THAT(r.output, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("CliSecretValue99")));
}

TEST(CliTest, CopiesADatasetOutOfS3) {
  auto server = testing::S3rver::Start("cli");
  ASSERT_TRUE(server.ok()) << server.status();
  UnderStoreOptions o;
  o.aws_credentials = testing::S3rver::Credentials();
  auto store = OpenUnderStore((*server)->Uri("ds"), o);
  ASSERT_TRUE(store.ok());
  auto* s3 = static_cast<S3Store*>(store->get());
  std::map<std::string, std::string> files;
  for (int i = 0; i < 30; ++i) {
    std::string path = absl::StrCat("class", i % 3, "/sample", i, ".bin");
    std::string data(1000 * i + 17, static_cast<char>('a' + i % 26));
    ASSERT_TRUE(s3->Put(path, data).ok());
    files[path] = data;
  }
  testing::TempDir dest;
  CliResult r =
      RunLarder(absl::StrCat("store copy '", (*server)->Uri("ds"), "' ",
                             dest.path(), " --chunk_size=4096 --parallel=4"),
                "AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("copied 30 files"));
  for (const auto& [path, data] : files) {
    auto got = testing::ReadFile(dest.path() + "/" + path);
    ASSERT_TRUE(got.ok()) << path;
    EXPECT_EQ(*got, data) << path;
  }
  r = RunLarder(
      absl::StrCat("store ls '", (*server)->Uri("ds"), "' --recursive"),
      "AWS_ACCESS_KEY_ID=BADKEY1234 AWS_SECRET_ACCESS_KEY=BadSecret1234");
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_THAT(r.output, HasSubstr("PERMISSION_DENIED"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("BadSecret1234")));
}

TEST(CliTest, EveryCommandHasHelp) {
  for (const char* cmd :
       {"master", "worker", "mount", "unmount", "ls", "stat", "cat", "cp",
        "load", "invalidate", "stats", "ring", "store"}) {
    CliResult r = RunLarder(absl::StrCat(cmd, " --help"));
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_THAT(r.output, HasSubstr("larder")) << cmd;
  }
}

TEST(CliTest, ClusterCommandsNameTheirErrors) {
  const std::string nowhere =
      absl::StrCat("--master=127.0.0.1:", testing::PickFreePort());
  for (const char* cmd :
       {"ls /", "stat /x", "ring", "stats", "mount", "load /x"}) {
    CliResult r = RunLarder(absl::StrCat(cmd, " ", nowhere));
    EXPECT_EQ(r.exit_code, 5) << cmd << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("cannot reach the Larder master")) << cmd;
  }
  testing::TempDir data;
  ASSERT_TRUE(testing::WriteFile(data.path() + "/d/a.txt", "hello").ok());
  auto master = testing::MasterProcess::Start(
      {absl::StrCat("--allowed_file_roots=", data.path(), ",/tmp")});
  ASSERT_TRUE(master.ok()) << master.status();
  const std::string at = absl::StrCat("--master=", (*master)->address());
  CliResult r = RunLarder(absl::StrCat("mount /data not-a-uri ", at));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("bad under-store URI"));
  r = RunLarder(absl::StrCat("mount /data file://", data.path(), "/d ", at));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunLarder(absl::StrCat("mount /data/sub file:///tmp ", at));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("overlaps the existing mount"));
  r = RunLarder(absl::StrCat("stat /elsewhere/x ", at));
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_THAT(r.output, HasSubstr("no mount holds"));
  r = RunLarder(absl::StrCat("stat /data/missing.txt ", at));
  EXPECT_EQ(r.exit_code, 3) << r.output;
  r = RunLarder(absl::StrCat("stat /data/a.txt ", at));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("size:       5"));
  r = RunLarder(absl::StrCat("unmount /nope ", at));
  EXPECT_EQ(r.exit_code, 3) << r.output;
  r = RunLarder(absl::StrCat("ls /data ", at));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("/data/a.txt"));
}

// file:// mounts only under the roots the operator allows: the master runs
// as root, so a mount of a root-only directory would serve its files to
// anyone who can reach the cluster.
TEST(CliTest, FileMountsOnlyUnderAllowedRoots) {
  testing::TempDir allowed, outside;
  ASSERT_TRUE(testing::WriteFile(allowed.path() + "/ds/a.txt", "ok").ok());
  ASSERT_TRUE(
      testing::WriteFile(outside.path() + "/secret.txt", "TOPSECRET-42").ok());
  ASSERT_EQ(::chmod(outside.path().c_str(), 0700), 0);
  // A symlink inside the allowed root that leads out of it.
  ASSERT_EQ(
      ::symlink(outside.path().c_str(), (allowed.path() + "/escape").c_str()),
      0);
  auto master = testing::MasterProcess::Start(
      {absl::StrCat("--allowed_file_roots=", allowed.path())});
  ASSERT_TRUE(master.ok()) << master.status();
  const std::string at = absl::StrCat("--master=", (*master)->address());

  for (const std::string& root :
       {outside.path(), allowed.path() + "/escape", std::string("/etc")}) {
    CliResult r =
        RunLarder(absl::StrCat("mount /pwn 'file://", root, "' ", at));
    EXPECT_EQ(r.exit_code, 4) << root << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("outside the directories this cluster "
                                    "may serve"))
        << root;
    EXPECT_THAT(r.output, HasSubstr("--allowed_file_roots")) << root;
  }
  CliResult r = RunLarder(absl::StrCat("mount", " ", at));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("/pwn")));
  r = RunLarder(absl::StrCat("cat /pwn/secret.txt ", at));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("TOPSECRET")));

  // Inside the allowed root: served; a symlink out of the mount is refused
  // by the store (RESOLVE_BENEATH).
  r = RunLarder(absl::StrCat("mount /ds file://", allowed.path(), " ", at));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunLarder(absl::StrCat("cat /ds/ds/a.txt ", at));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "ok");
  r = RunLarder(absl::StrCat("cat /ds/escape/secret.txt ", at));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("TOPSECRET")));

  // No roots allowed (the default): no file:// mount at all.
  auto strict = testing::MasterProcess::Start();
  ASSERT_TRUE(strict.ok()) << strict.status();
  r = RunLarder(absl::StrCat("mount /ds file://", allowed.path(),
                             " --master=", (*strict)->address()));
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_THAT(r.output, HasSubstr("none are allowed"));
}

}  // namespace
}  // namespace larder
