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
#include "nlohmann/json.hpp"
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

// Mistakes on the command line are usage errors (exit 2) that say what to
// type instead; help lists every flag of the command without build paths.
TEST(CliTest, FlagMistakesAreUsageErrorsWithASuggestion) {
  const std::string nowhere =
      absl::StrCat(" --master=127.0.0.1:", testing::PickFreePort());
  CliResult r = RunLarder("ls / --log-levl=debug" + nowhere);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("did you mean --log_level?"));
  // Dashes are accepted; the command then runs (and finds no master).
  r = RunLarder("ls / --log-level=debug" + nowhere);
  EXPECT_EQ(r.exit_code, 5) << r.output;
  r = RunLarder("ls / --ram_capacity=1GiB" + nowhere);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("does not take --ram_capacity"));
  r = RunLarder("cp a b --parallel=lots" + nowhere);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--parallel=lots"));
  r = RunLarder("ls / --output=xml" + nowhere);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = RunLarder("lss /");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("did you mean 'ls'?"));
  r = RunLarder("--helpfull");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* c :
       {"larder worker", "--ram_capacity=1GiB", "--mount_block_size=4MiB",
        "--daemon (default "
        "false)"}) {
    EXPECT_THAT(r.output, HasSubstr(c));
  }
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr(".cc")));
  // etcd's leases are whole seconds: a leader lease of 2.5s is refused
  // (it would be granted as 2s while the master counted on 2.5s).
  testing::TempDir state;
  r = RunLarder(
      absl::StrCat("master --etcd=127.0.0.1:", testing::PickFreePort(),
                   " --leader_lease=2.5s --state_dir=", state.path(),
                   " --master_listen=127.0.0.1:0"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--leader_lease must be whole seconds"));
  r = RunLarder("worker --helpfull");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("--ram_max_blocks=auto"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("  --daemon")));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr(".cc")));
}

TEST(CliTest, VersionAndCompletion) {
  CliResult r = RunLarder("version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, ::testing::StartsWith("larder 0."));
  EXPECT_THAT(r.output, HasSubstr("commit "));
  EXPECT_EQ(RunLarder("--version").output, r.output);
  r = RunLarder("version --output=json");
  ASSERT_EQ(r.exit_code, 0);
  nlohmann::json j = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_FALSE(j["version"].get<std::string>().empty());
  EXPECT_FALSE(j["commit"].get<std::string>().empty());
  EXPECT_FALSE(j["build_type"].get<std::string>().empty());
  // The completion script completes commands and each command's flags.
  testing::TempDir dir;
  ASSERT_TRUE(testing::WriteFile(dir.path() + "/c.bash",
                                 RunLarder("completion bash").output)
                  .ok());
  auto complete = [&](const std::string& words, int cword) {
    testing::Shell sh = testing::Sh(absl::StrCat(
        "bash -c 'source ", dir.path(), "/c.bash; COMP_WORDS=(", words,
        "); COMP_CWORD=", cword, "; _larder; echo \"${COMPREPLY[*]}\"'"));
    return sh.out;
  };
  EXPECT_EQ(complete("larder lo", 1), "load\n");
  EXPECT_EQ(complete("larder ls --recu", 2), "--recursive\n");
  EXPECT_EQ(complete("larder mount /a b --mount_blo", 4),
            "--mount_block_size=\n");
  EXPECT_EQ(complete("larder stats --output = j", 4), "json\n");
  EXPECT_EQ(RunLarder("completion zsh").exit_code, 2);
}

TEST(CliTest, EveryCommandHasHelp) {
  for (const char* cmd :
       {"master", "worker", "fuse", "csi", "mount", "unmount", "ls", "stat",
        "cat", "cp", "load", "invalidate", "evict", "stats", "ring", "store",
        "version", "completion"}) {
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
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("overlaps the existing mount"));
  // The same mount again succeeds (idempotent start-up scripts); another
  // URI on its path is a conflict that says what to do.
  r = RunLarder(absl::StrCat("mount /data file://", data.path(), "/d ", at));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = RunLarder(absl::StrCat("mount /data file:///tmp ", at));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("'/data' is already mounted from 'file://"));
  EXPECT_THAT(r.output, HasSubstr("run `larder unmount /data` first"));
  // Inputs refused before anything is changed, each with its reason.
  const std::pair<std::string, std::string> bad[] = {
      {"/e 's3://bucket/x?endpoint=not a url'", "bad S3 endpoint 'not a url'"},
      {"/e 's3://bucket/x?endpoint=http://host:99999'", "bad S3 endpoint"},
      {"/e file:///tmp --mount_block_size=0", "is not a block size"},
      {"/e file:///tmp --mount_block_size=2GiB",
       "out of range (4 KiB to 1 GiB)"},
      {"/e file:///tmp/../etc", "has a '..' component"},
      {"/e file:///tmp/./x", "has a '.' component"},
      {absl::StrCat("/e file://", data.path(), "/missing"), "does not exist"},
  };
  for (const auto& [args, want] : bad) {
    r = RunLarder(absl::StrCat("mount ", args, " ", at));
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(want)) << args;
  }
  r = RunLarder(absl::StrCat("mount ", at));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("/e ")));
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

// `--output=json` of every command that prints a table, parsed as JSON with
// the documented field names; and the daemons' start-up lines.
TEST(CliTest, JsonOutputForScriptsAndStartupLines) {
  testing::TempDir data;
  ASSERT_TRUE(testing::WriteFile(data.path() + "/d/a.txt", "hello").ok());
  ASSERT_TRUE(testing::WriteFile(data.path() + "/d/sub/b.txt", "abc").ok());
  auto master = testing::MasterProcess::Start(
      {absl::StrCat("--allowed_file_roots=", data.path())});
  ASSERT_TRUE(master.ok()) << master.status();
  auto worker = testing::WorkerProcess::Start(
      {absl::StrCat("--master=", (*master)->address()),
       absl::StrCat("--allowed_file_roots=", data.path())});
  ASSERT_TRUE(worker.ok()) << worker.status();
  const std::string at = absl::StrCat(" --master=", (*master)->address());
  auto json = [&](const std::string& args) {
    testing::Shell sh = testing::Sh(absl::StrCat(
        LARDER_CLI_BINARY, " ", args, at, " --output=json 2>/dev/null"));
    EXPECT_EQ(sh.code, 0) << args << ": " << sh.out;
    nlohmann::json j = nlohmann::json::parse(sh.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << args << ": " << sh.out;
    return j;
  };
  nlohmann::json j =
      json(absl::StrCat("mount /data file://", data.path(), "/d"));
  ASSERT_EQ(j["mounts"].size(), 1u) << j;
  EXPECT_EQ(j["mounts"][0]["path"], "/data");
  EXPECT_EQ(j["mounts"][0]["uri"], absl::StrCat("file://", data.path(), "/d"));
  EXPECT_EQ(j["mounts"][0]["block_size"], 4 << 20);
  EXPECT_EQ(j["mounts"][0]["metadata_ttl_ms"], 60000);
  EXPECT_TRUE(j["mounts"][0]["uid"].is_null());
  EXPECT_GT(j["version"].get<int>(), 0);
  EXPECT_EQ(json("mount")["mounts"].size(), 1u);

  j = json("ls /data");
  EXPECT_EQ(j["path"], "/data");
  ASSERT_EQ(j["entries"].size(), 2u) << j;
  for (const auto& e : j["entries"]) {
    if (e["path"] == "/data/a.txt") {
      EXPECT_EQ(e["type"], "file");
      EXPECT_EQ(e["size"], 5);
      EXPECT_GT(e["mtime_unix_ms"].get<int64_t>(), 0);
      EXPECT_THAT(e["mtime"].get<std::string>(), ::testing::EndsWith("Z"));
    } else {
      EXPECT_EQ(e["path"], "/data/sub");
      EXPECT_EQ(e["type"], "directory");
    }
  }
  j = json("ls /data --recursive");
  ASSERT_EQ(j["entries"].size(), 2u) << j;  // The files.
  EXPECT_EQ(j["entries"][1]["path"], "/data/sub/b.txt");
  j = json("stat /data/a.txt");
  EXPECT_EQ(j["path"], "/data/a.txt");
  EXPECT_EQ(j["type"], "file");
  EXPECT_EQ(j["size"], 5);
  EXPECT_EQ(j["mount"], "/data");
  EXPECT_EQ(j["blocks"], 1);
  EXPECT_FALSE(j["version"].get<std::string>().empty());

  ASSERT_TRUE(testing::WaitFor(
      [&] { return json("ring")["workers"].size() == 1u; }, absl::Seconds(20)));
  j = json("ring");
  EXPECT_EQ(j["workers"][0]["address"], (*worker)->address());
  EXPECT_NEAR(j["workers"][0]["share"].get<double>(), 1.0, 1e-9);
  EXPECT_GT(j["workers"][0]["vnodes"].get<int>(), 0);

  j = json("load /data");
  EXPECT_EQ(j["state"], "done") << j;
  EXPECT_EQ(j["files_total"], 2);
  EXPECT_EQ(j["files_done"], 2);
  EXPECT_EQ(j["bytes_done"], 8);
  EXPECT_EQ(j["blocks_total"], 2);
  EXPECT_EQ(j["blocks_failed"], 0);
  EXPECT_FALSE(j["job_id"].get<std::string>().empty());

  j = json("stats");
  ASSERT_EQ(j["workers"].size(), 1u) << j;
  EXPECT_EQ(j["workers"][0]["alive"], true);
  EXPECT_EQ(j["workers"][0]["misses"], 2);
  EXPECT_EQ(j["workers"][0]["tiers"][0]["name"], "ram");
  EXPECT_EQ(j["workers"][0]["tiers"][0]["blocks"], 2);
  EXPECT_EQ(j["cluster"]["misses"], 2);

  // Evicting a directory drops the blocks under it, a file its own; the
  // blocks come back on the next read (a miss).
  j = json("evict /data/sub");
  EXPECT_EQ(j["evicted"], 1) << j;
  EXPECT_EQ(j["workers"], 1);
  EXPECT_EQ(json("stats")["workers"][0]["tiers"][0]["blocks"], 1);
  EXPECT_EQ(json("evict /data/a.txt")["evicted"], 1);
  EXPECT_EQ(json("evict /data")["evicted"], 0);
  EXPECT_EQ(json("stats")["workers"][0]["tiers"][0]["blocks"], 0);
  CliResult missing = RunLarder(absl::StrCat("evict /data/nope", at));
  EXPECT_EQ(missing.exit_code, 3) << missing.output;
  ASSERT_EQ(RunLarder(absl::StrCat("cat /data/a.txt", at)).exit_code, 0);
  EXPECT_EQ(json("stats")["workers"][0]["misses"], 3);
  // cat of several files writes each in turn; one that is missing ends it
  // with NotFound's exit code.
  testing::Shell both = testing::Sh(
      absl::StrCat(LARDER_CLI_BINARY, " cat /data/a.txt /data/sub/b.txt", at,
                   " 2>/dev/null"));
  EXPECT_EQ(both.code, 0);
  EXPECT_EQ(both.out, "helloabc");
  CliResult gone = RunLarder(absl::StrCat("cat /data/a.txt /data/nope", at));
  EXPECT_EQ(gone.exit_code, 3) << gone.output;

  EXPECT_EQ(json("unmount /data")["mounts"].size(), 0u);

  // Start-up lines: what each daemon serves.
  auto log = testing::ReadFile((*master)->log_path());
  ASSERT_TRUE(log.ok());
  EXPECT_THAT(*log, HasSubstr("  state        "));
  EXPECT_THAT(*log, HasSubstr(absl::StrCat("  file roots   ", data.path())));
  log = testing::ReadFile((*worker)->log_path());
  ASSERT_TRUE(log.ok());
  EXPECT_THAT(*log, HasSubstr(absl::StrCat("  cluster      master ",
                                           (*master)->address())));
  EXPECT_THAT(*log, HasSubstr("  RAM tier     1.0 GiB"));
  auto standalone = testing::WorkerProcess::Start(
      {absl::StrCat("--mount=d=file://", data.path(), "/d"),
       absl::StrCat("--allowed_file_roots=", data.path())},
      {"LARDER_MASTER="});
  ASSERT_TRUE(standalone.ok()) << standalone.status();
  log = testing::ReadFile((*standalone)->log_path());
  ASSERT_TRUE(log.ok());
  EXPECT_THAT(*log, HasSubstr("standalone: no --master or LARDER_MASTER"));
  EXPECT_THAT(*log, HasSubstr(absl::StrCat("d -> file://", data.path())));
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
