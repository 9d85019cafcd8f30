// Copyright 2026 The Larder Authors.
#include "common/security.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "common/log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace larder {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/larder-security-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::unsetenv("LARDER_TOKEN");
    ::unsetenv("LARDER_TOKEN_FILE");
  }
  void TearDown() override {
    std::string cmd = "rm -rf " + dir_;
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(SecurityTest, TokensFileRolesCommentsAndErrorsThatNeverEchoTheToken) {
  auto ok = LoadTokensFile(Write("t1",
                                 "# cluster tokens\n\n"
                                 "admin  0123456789abcdef-admin\n"
                                 "reader\t0123456789abcdef-reader\n"));
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0].role, Role::kAdmin);
  EXPECT_EQ((*ok)[1].token, "0123456789abcdef-reader");

  auto bad_role = LoadTokensFile(Write("t2", "root 0123456789abcdef-x\n"));
  EXPECT_EQ(bad_role.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_role.status().message(), HasSubstr("t2:1: unknown role"));
  EXPECT_THAT(bad_role.status().message(), Not(HasSubstr("0123456789")));

  auto short_token = LoadTokensFile(Write("t3", "\nreader tooshort\n"));
  EXPECT_EQ(short_token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_token.status().message(), HasSubstr("t3:2"));
  EXPECT_THAT(short_token.status().message(), Not(HasSubstr("tooshort")));

  auto three = LoadTokensFile(Write("t4", "admin a b\n"));
  EXPECT_EQ(three.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadTokensFile(Write("t5", "# nothing\n")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadTokensFile(dir_ + "/missing").status().code(),
            absl::StatusCode::kNotFound);
  // Loaded tokens are masked in every log line from now on.
  EXPECT_THAT(RedactSecrets("x 0123456789abcdef-admin y"),
              Not(HasSubstr("0123456789abcdef-admin")));
}

TEST_F(SecurityTest, ReaderTokensMayBeLimitedToMounts) {
  auto ok = LoadTokensFile(Write("s1",
                                 "reader:/datasets/imagenet,/ref "
                                 "0123456789abcdef-scoped\n"
                                 "reader 0123456789abcdef-everything\n"));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_THAT((*ok)[0].mounts,
              ::testing::ElementsAre("/datasets/imagenet", "/ref"));
  EXPECT_TRUE((*ok)[1].mounts.empty());
  for (const char* bad :
       {"admin:/x 0123456789abcdef-admin\n", "reader: 0123456789abcdef-x\n",
        "reader:datasets 0123456789abcdef-x\n",
        "reader:/a/../b 0123456789abcdef-x\n",
        "reader:/a/ 0123456789abcdef-x\n",
        "reader:/a,,/b 0123456789abcdef-x\n"}) {
    auto r = LoadTokensFile(Write("s2", bad));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), Not(HasSubstr("0123456789")));
  }

  const std::vector<std::string> scope = {"/datasets/imagenet", "/ref"};
  EXPECT_TRUE(MountInScope(scope, "/datasets/imagenet"));
  EXPECT_TRUE(MountInScope(scope, "/ref/genomes"));
  EXPECT_FALSE(MountInScope(scope, "/datasets/imagenet2"));
  EXPECT_FALSE(MountInScope(scope, "/datasets"));
  EXPECT_FALSE(MountInScope(scope, "/re"));
  EXPECT_TRUE(MountInScope({}, "/anything"));
}

// The one decision for every path that hands out bytes.
TEST(MayReadMountTest, RolesScopesAndModes) {
  const MountAccess team{0, 4242, 0440};
  const MountAccess open_to_all{};
  Caller admin{Role::kAdmin, {}, AnonymousPeer()};
  EXPECT_TRUE(MayReadMount(admin, "/team", team, 0, 0).ok());
  Caller scoped{Role::kReader, {"/public"}, std::nullopt};
  EXPECT_TRUE(MayReadMount(scoped, "/public", team, 0, 0).ok());
  absl::Status s = MayReadMount(scoped, "/team", open_to_all, 0, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("reads /public only"));
  // A token reads by its grant; an anonymous caller by the other bits.
  EXPECT_TRUE(
      MayReadMount(Caller{Role::kReader, {}, std::nullopt}, "/team", team, 0, 0)
          .ok());
  Caller anonymous{Role::kReader, {}, AnonymousPeer()};
  s = MayReadMount(anonymous, "/team", team, 0, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("a caller without credentials"));
  EXPECT_TRUE(MayReadMount(anonymous, "/open", open_to_all, 0, 0).ok());
  // A local peer: the group's members only.
  PeerCredentials member;
  member.uid = 1000;
  member.gid = 100;
  member.groups = {4242};
  EXPECT_TRUE(
      MayReadMount(Caller{Role::kReader, {}, member}, "/team", team, 0, 0)
          .ok());
  member.groups.clear();
  EXPECT_FALSE(
      MayReadMount(Caller{Role::kReader, {}, member}, "/team", team, 0, 0)
          .ok());
  EXPECT_EQ(MayReadMount(Caller{}, "/open", open_to_all, 0, 0).code(),
            absl::StatusCode::kPermissionDenied);
  // Per-file mounts pass here: their files are checked where the bytes are.
  MountAccess per_file;
  per_file.per_file = true;
  EXPECT_TRUE(MayReadMount(anonymous, "/files", per_file, 0, 0).ok());
  EXPECT_EQ(per_file.FileMode(), 0u);
  EXPECT_EQ(MountAccess{}.FileMode(), 0444u);
}

// The admin token of a server with no configured authentication: made once,
// 0600 in a 0700 directory, the same for every process that starts at once,
// and refused when anyone else could read or write it.
TEST_F(SecurityTest, TheLocalAdminTokenIsMadeOnceAndKeptPrivate) {
  const std::string path = dir_ + "/state/larder/admin.token";
  std::vector<std::string> got(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      auto t = EnsureAdminToken(path);
      got[i] = t.ok() ? *t : std::string(t.status().message());
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(got[0].size(), 64u) << got[0];
  for (const std::string& g : got) EXPECT_EQ(g, got[0]);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir_ + "/state/larder").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(*EnsureAdminToken(path), got[0]);  // Kept across restarts.
  // No temporary file is left behind.
  size_t entries = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(dir_ + "/state/larder")) {
    EXPECT_EQ(e.path().filename(), "admin.token");
    ++entries;
  }
  EXPECT_EQ(entries, 1u);
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto loose = EnsureAdminToken(path);
  EXPECT_EQ(loose.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(loose.status().message(), HasSubstr("mode 0600"));
  EXPECT_THAT(loose.status().message(), Not(HasSubstr(got[0])));
  EXPECT_EQ(EnsureAdminToken("relative/admin.token").status().code(),
            absl::StatusCode::kInvalidArgument);

  // A client with no token presents it when it can read it.
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  SecurityOptions o;
  o.admin_token_file = path;
  auto channels = ChannelFactory::Create(o);
  ASSERT_TRUE(channels.ok()) << channels.status();
  EXPECT_TRUE((*channels)->has_local_admin_token());
  EXPECT_FALSE((*channels)->has_token());
  o.admin_token_file = dir_ + "/none";
  channels = ChannelFactory::Create(o);
  ASSERT_TRUE(channels.ok()) << channels.status();
  EXPECT_FALSE((*channels)->has_local_admin_token());
}

TEST_F(SecurityTest, ClientTokenFromFileThenEnvironment) {
  auto none = LoadClientToken("");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "");
  const std::string f = Write("tok", "client-token-from-file-1\n");
  EXPECT_EQ(*LoadClientToken(f), "client-token-from-file-1");
  ::setenv("LARDER_TOKEN_FILE", f.c_str(), 1);
  EXPECT_EQ(*LoadClientToken(""), "client-token-from-file-1");
  ::setenv("LARDER_TOKEN", "client-token-from-env-22", 1);
  EXPECT_EQ(*LoadClientToken(""), "client-token-from-env-22");
  // A flag's file wins over the environment.
  EXPECT_EQ(*LoadClientToken(f), "client-token-from-file-1");
  ::setenv("LARDER_TOKEN", "short", 1);
  auto bad = LoadClientToken("");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("$LARDER_TOKEN"));
  EXPECT_EQ(LoadClientToken(Write("empty", "\n")).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::string locked = Write("locked", "client-token-locked-333\n");
  ASSERT_EQ(::chmod(locked.c_str(), 0), 0);
  if (::geteuid() != 0) {
    EXPECT_EQ(LoadClientToken(locked).status().code(),
              absl::StatusCode::kPermissionDenied);
  }
}

TEST(SecurityLoopbackTest, WhichListenAddressesAreLoopback) {
  for (const char* a : {"127.0.0.1:7060", "127.1.2.3:1", "localhost:7060",
                        "[::1]:7060", "unix:/run/larder.sock"}) {
    EXPECT_TRUE(IsLoopbackAddress(a)) << a;
  }
  for (const char* a : {"0.0.0.0:7060", "[::]:7060", "10.0.0.5:7060", ":7060",
                        "master.example:7060", "[::ffff:1.2.3.4]:1"}) {
    EXPECT_FALSE(IsLoopbackAddress(a)) << a;
  }
}

TEST(SecurityExposureTest, BeyondLoopbackNeedsAuthenticationOrTheInsecureFlag) {
  SecurityOptions o;
  EXPECT_TRUE(CheckExposure("master", "127.0.0.1:7060", o).ok());
  absl::Status st = CheckExposure("master", "0.0.0.0:7060", o);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("--allow_insecure_network"));
  o.allow_insecure_network = true;
  EXPECT_TRUE(CheckExposure("master", "0.0.0.0:7060", o).ok());
  o.allow_insecure_network = false;
  o.auth_tokens_file = "/etc/larder/tokens";
  EXPECT_TRUE(CheckExposure("worker", "0.0.0.0:7070", o).ok());
  // TLS without client-certificate verification authenticates no one.
  o.auth_tokens_file.clear();
  o.tls_cert_file = "c.pem";
  o.tls_key_file = "k.pem";
  EXPECT_FALSE(CheckExposure("worker", "0.0.0.0:7070", o).ok());
  o.tls_ca_file = "ca.pem";
  EXPECT_TRUE(CheckExposure("worker", "0.0.0.0:7070", o).ok());
}

TEST_F(SecurityTest, CredentialErrorsNameTheFile) {
  SecurityOptions o;
  o.tls_cert_file = dir_ + "/nope.pem";
  EXPECT_EQ(ServerCredentials(o).status().code(),
            absl::StatusCode::kInvalidArgument);  // No key.
  o.tls_key_file = Write("key.pem", "not a key");
  auto st = ServerCredentials(o).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr("nope.pem"));
  o.tls_cert_file = Write("cert.pem", "-----BEGIN CERTIFICATE-----\n");
  st = ServerCredentials(o).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("not a PEM private key"));
  EXPECT_THAT(st.message(), Not(HasSubstr("not a key")));

  SecurityOptions c;
  c.tls_ca_file = Write("ca.pem", "garbage");
  EXPECT_EQ(ChannelFactory::Create(c).status().code(),
            absl::StatusCode::kInvalidArgument);
  c.tls_ca_file.clear();
  c.tls_server_name = "larder-master";
  EXPECT_EQ(ChannelFactory::Create(c).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace larder
