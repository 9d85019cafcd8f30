// Copyright 2026 The Larder Authors.
//
// The redirect rules of redirect_policy.h, with a resolver the test controls
// (names that resolve to loopback, link-local or a mix cannot be arranged
// with the machine's own DNS). The same policy against a live namenode is in
// tests/hdfs_store_test.cc.
#include "understore/redirect_policy.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace larder {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class RedirectPolicyTest : public ::testing::Test {
 protected:
  RedirectPolicy::Resolver Resolver() {
    return [this](const std::string& host)
               -> absl::StatusOr<std::vector<std::string>> {
      ++lookups_[host];
      auto it = dns_.find(host);
      if (it == dns_.end())
        return absl::UnavailableError(absl::StrCat("no such name ", host));
      return it->second;
    };
  }

  RedirectPolicy Policy(const std::string& namenode,
                        const std::string& datanodes = "") {
    auto p = RedirectPolicy::Create(namenode, datanodes, Resolver());
    EXPECT_TRUE(p.ok()) << p.status();
    return *std::move(p);
  }

  // The refusal of `location` from the namenode, and checks that it says
  // `rule` and names `host`, and nothing of the path or query.
  void ExpectRefused(const RedirectPolicy& policy, const std::string& location,
                     const std::string& rule, const std::string& host) {
    auto t = policy.Check(kFrom, location);
    ASSERT_FALSE(t.ok()) << location << " was allowed: " << t->url;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kPermissionDenied)
        << location << ": " << t.status();
    EXPECT_THAT(std::string(t.status().message()),
                HasSubstr(absl::StrCat("(", rule)))
        << location;
    if (!host.empty()) {
      EXPECT_THAT(std::string(t.status().message()),
                  HasSubstr(absl::StrCat("'", host, "'")))
          << location;
    }
    EXPECT_THAT(std::string(t.status().message()), Not(HasSubstr("SECRET")))
        << location;
  }

  static constexpr const char* kFrom =
      "http://nn1.hdfs.example.com:9870/webhdfs/v1/d/f?op=OPEN&delegation="
      "SECRET";
  std::map<std::string, std::vector<std::string>> dns_ = {
      {"nn1.hdfs.example.com", {"10.0.0.1"}},
      {"dn1.hdfs.example.com", {"10.0.0.5", "2001:db8::5"}},
      {"dn-loop.hdfs.example.com", {"127.0.0.1"}},
      {"dn-mixed.hdfs.example.com", {"10.0.0.6", "169.254.169.254"}},
      {"dn-mapped.hdfs.example.com", {"::ffff:169.254.169.254"}},
      {"dn-ll6.hdfs.example.com", {"fe80::1"}},
      {"dn-nat64.hdfs.example.com", {"64:ff9b::a9fe:a9fe"}},
      {"dn-aws6.hdfs.example.com", {"fd00:ec2::254"}},
      {"dn-zero.hdfs.example.com", {"0.0.0.0"}},
      {"dn-v6loop.hdfs.example.com", {"::1"}},
      {"dn-empty.hdfs.example.com", {}},
      {"dn-a.other.net", {"10.0.0.7"}},
      {"x.pool.example.org", {"10.0.0.8"}},
      {"meta.pool.example.org", {"169.254.169.254"}},
      {"localhost", {"127.0.0.1", "::1"}},
  };
  std::map<std::string, int> lookups_;
};

TEST_F(RedirectPolicyTest, DatanodesInTheNamenodesDomainArePinned) {
  RedirectPolicy p = Policy("http://nn1.hdfs.example.com:9870");
  auto t = p.Check(kFrom,
                   "http://DN1.Hdfs.Example.COM.:9864/webhdfs/v1/d/f?op=OPEN"
                   "&delegation=SECRET&offset=0");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->url,
            "http://dn1.hdfs.example.com:9864/webhdfs/v1/d/f?op=OPEN&"
            "delegation=SECRET&offset=0");
  EXPECT_EQ(t->host, "dn1.hdfs.example.com");
  // The connection goes to what was checked, not to a later DNS answer.
  EXPECT_THAT(t->resolve, ElementsAre("+dn1.hdfs.example.com:9864:10.0.0.5,"
                                      "[2001:db8::5]"));
  // https keeps its default port; a relative Location is the namenode.
  t = p.Check(kFrom, "https://dn1.hdfs.example.com/x");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->resolve, ElementsAre("+dn1.hdfs.example.com:443:10.0.0.5,"
                                      "[2001:db8::5]"));
  t = p.Check(kFrom, "/webhdfs/v1/d/g?op=OPEN");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->url, "http://nn1.hdfs.example.com:9870/webhdfs/v1/d/g?op=OPEN");
  EXPECT_THAT(t->resolve, ElementsAre("+nn1.hdfs.example.com:9870:10.0.0.1"));
}

TEST_F(RedirectPolicyTest, OnlyHttpAndHttpsWithoutCredentials) {
  RedirectPolicy p = Policy("http://nn1.hdfs.example.com:9870");
  ExpectRefused(p, "dict://dn1.hdfs.example.com:11211/stat", "scheme",
                "dn1.hdfs.example.com");
  ExpectRefused(p, "gopher://dn1.hdfs.example.com:6379/_FLUSHALL", "scheme",
                "dn1.hdfs.example.com");
  ExpectRefused(p, "file:///etc/passwd", "scheme", "");
  ExpectRefused(p, "ftp://dn1.hdfs.example.com/x", "scheme", "");
  ExpectRefused(p, "ldap://dn1.hdfs.example.com/x", "scheme", "");
  ExpectRefused(p, "javascript:alert(1)", "url", "");
  ExpectRefused(p, "http://admin:SECRET@dn1.hdfs.example.com:9864/x",
                "credentials", "dn1.hdfs.example.com");
  EXPECT_TRUE(lookups_.empty());  // Nothing was even resolved.
}

TEST_F(RedirectPolicyTest, HostsOutsideTheDomainAreRefusedUnresolved) {
  RedirectPolicy p = Policy("http://nn1.hdfs.example.com:9870");
  for (const char* host :
       {"evil.example.net", "hdfs.example.com", "a.dn1.hdfs.example.com",
        "dn1.hdfs.example.com.evil.net", "10.0.0.5", "localhost"}) {
    ExpectRefused(p, absl::StrCat("http://", host, ":9864/x?SECRET"), "host",
                  host);
  }
  EXPECT_TRUE(lookups_.empty());
  // A namenode with a one-label domain ("com") admits no neighbours.
  RedirectPolicy tld = Policy("http://example.com:9870");
  ExpectRefused(tld, "http://evil.com/x", "host", "evil.com");
}

TEST_F(RedirectPolicyTest, LinkLocalAndMetadataAreNeverFollowed) {
  RedirectPolicy p = Policy("http://nn1.hdfs.example.com:9870");
  // Literals, in every spelling libcurl accepts.
  for (const char* url :
       {"http://169.254.169.254/latest/meta-data/?SECRET", "http://2852039166/",
        "http://0xA9FEA9FE/", "http://169.254.43518/",
        "http://[::ffff:169.254.169.254]/", "http://[fe80::1]:9864/",
        "http://[fe80::1%25eth0]/"}) {
    ExpectRefused(p, url, "link-local", "");
  }
  ExpectRefused(p, "http://[fd00:ec2::254]/", "metadata", "fd00:ec2::254");
  ExpectRefused(p, "http://100.100.100.200/", "metadata", "100.100.100.200");
  // Names in the domain that resolve there, even partly.
  for (const char* host :
       {"dn-mixed.hdfs.example.com", "dn-mapped.hdfs.example.com",
        "dn-ll6.hdfs.example.com", "dn-nat64.hdfs.example.com"}) {
    ExpectRefused(p, absl::StrCat("http://", host, ":9864/x"), "link-local",
                  host);
  }
  ExpectRefused(p, "http://dn-aws6.hdfs.example.com/", "metadata",
                "dn-aws6.hdfs.example.com");
  // Even from a namenode on loopback, or when the mount lists the host.
  RedirectPolicy local = Policy("http://127.0.0.1:9870");
  ExpectRefused(local, "http://169.254.169.254/", "link-local",
                "169.254.169.254");
  RedirectPolicy listed =
      Policy("http://nn1.hdfs.example.com:9870",
             "169.254.169.254,meta.pool.example.org,.pool.example.org");
  ExpectRefused(listed, "http://169.254.169.254/", "link-local", "");
  ExpectRefused(listed, "http://meta.pool.example.org/", "link-local",
                "meta.pool.example.org");
}

// The namenode is reached by a name that is not loopback: a datanode name
// in its domain that resolves to loopback (or to "this host", 0.0.0.0) is
// refused, and so is a literal loopback address.
TEST_F(RedirectPolicyTest, LoopbackOnlyFromALoopbackNamenodeOrWhenListed) {
  RedirectPolicy p = Policy("http://nn1.hdfs.example.com:9870");
  for (const char* host :
       {"dn-loop.hdfs.example.com", "dn-zero.hdfs.example.com",
        "dn-v6loop.hdfs.example.com"}) {
    ExpectRefused(p, absl::StrCat("http://", host, ":6379/"), "loopback", host);
  }
  for (const char* url :
       {"http://127.0.0.1:6379/", "http://127.1.2.3/", "http://[::1]:8080/",
        "http://0.0.0.0:22/", "http://0/", "http://0177.0.0.1/"}) {
    ExpectRefused(p, url, "loopback", "");
  }

  // A namenode on loopback (a one-machine test cluster) may send its
  // clients to its own loopback address, on any port.
  RedirectPolicy local = Policy("http://127.0.0.1:9870");
  auto t = local.Check("http://127.0.0.1:9870/webhdfs/v1/f?op=OPEN",
                       "http://127.0.0.1:41000/webhdfs/v1/f?op=OPEN");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->url, "http://127.0.0.1:41000/webhdfs/v1/f?op=OPEN");
  EXPECT_TRUE(t->resolve.empty());
  ExpectRefused(local, "http://127.0.0.2:41000/", "host", "127.0.0.2");
  RedirectPolicy named_local = Policy("http://localhost:9870");
  t = named_local.Check("http://localhost:9870/", "http://localhost:41000/x");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->resolve, ElementsAre("+localhost:41000:127.0.0.1,[::1]"));

  // Listed exactly: allowed; by a .domain entry: not for loopback.
  RedirectPolicy listed =
      Policy("http://nn1.hdfs.example.com:9870",
             "127.0.0.1,dn-loop.hdfs.example.com,.pool.example.org");
  EXPECT_TRUE(listed.Check(kFrom, "http://127.0.0.1:9864/").ok());
  EXPECT_TRUE(listed.Check(kFrom, "http://dn-loop.hdfs.example.com/").ok());
  dns_["y.pool.example.org"] = {"127.0.0.1"};
  ExpectRefused(listed, "http://y.pool.example.org/", "loopback",
                "y.pool.example.org");
}

TEST_F(RedirectPolicyTest, AnExplicitListReplacesTheDomainRule) {
  RedirectPolicy p =
      Policy("http://nn1.hdfs.example.com:9870",
             " dn-a.other.net , .pool.example.org,10.9.9.9,,DN-B.other.net.");
  for (const char* ok :
       {"http://dn-a.other.net:1004/x", "http://x.pool.example.org/x",
        "http://10.9.9.9/x", "http://nn1.hdfs.example.com:9870/x"}) {
    auto t = p.Check(kFrom, ok);
    EXPECT_TRUE(t.ok()) << ok << ": " << t.status();
  }
  ExpectRefused(p, "http://dn1.hdfs.example.com/", "host",
                "dn1.hdfs.example.com");
  ExpectRefused(p, "http://pool.example.org/", "host", "pool.example.org");
  ExpectRefused(p, "http://10.9.9.8/", "host", "10.9.9.8");
  // A listed name must still resolve.
  auto t = p.Check(kFrom, "http://dn-b.other.net/");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnavailable) << t.status();
  t = Policy("http://nn1.hdfs.example.com:9870")
          .Check(kFrom, "http://dn-empty.hdfs.example.com/");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnavailable) << t.status();
}

TEST_F(RedirectPolicyTest, BadListsAreRefusedAtOpen) {
  for (const char* bad :
       {"dn1:9864", ",", "dn 1", "http://dn1", "dn1/x", "dn1@x"}) {
    auto p = RedirectPolicy::Create("http://nn:9870", bad, Resolver());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(
      RedirectPolicy::Create("http://nn:9870", "[::1],fd00::7", Resolver())
          .ok());
}

TEST(RedirectPolicySystemTest, SystemResolverAnswersNumericAddresses) {
  auto local = RedirectPolicy::SystemResolve("localhost");
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_THAT(*local,
              ::testing::Contains(::testing::AnyOf("127.0.0.1", "::1")));
  EXPECT_EQ(
      RedirectPolicy::SystemResolve("no-such-host.invalid").status().code(),
      absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace larder
