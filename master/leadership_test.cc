// Copyright 2026 The Larder Authors.
//
// Leader election and the guarded store against a real etcd: the guard
// refuses the write of a leader whose term is over even while its own clock
// says it still leads; a leader that stops hands over at once; the master's
// etcd connection works over TLS with a client certificate and fails with a
// named error without one.
#include "master/leadership.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/etcd.h"
#include "tests/testing/pki.h"
#include "tests/testing/process.h"

namespace larder {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<EtcdClient> Client(const testing::EtcdProcess& etcd,
                                   EtcdOptions o = {}) {
  o.endpoints = {etcd.endpoint()};
  auto c = EtcdClient::Create(std::move(o));
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

std::unique_ptr<EtcdLeadership> Campaign(EtcdClient* etcd,
                                         const std::string& name,
                                         absl::Duration lease) {
  EtcdLeadership::Options o;
  o.advertise = name;
  o.lease_ttl = lease;
  auto l = std::make_unique<EtcdLeadership>(etcd, std::move(o));
  l->Start();
  return l;
}

TEST(LeadershipTest, GuardRefusesTheWriteOfALeaderWhoseTermIsOver) {
  auto etcd = testing::EtcdProcess::Start();
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  auto client = Client(**etcd);
  ASSERT_NE(client, nullptr);
  // A long lease: A renews every 10 s, so for those seconds its own clock
  // says it leads (as for a leader paused and woken up).
  auto a = Campaign(client.get(), "a:7060", absl::Seconds(30));
  ASSERT_TRUE(
      testing::WaitFor([&] { return a->Term() != 0; }, absl::Seconds(10)));
  EtcdStateStore store_a(client.get(), a.get());
  ASSERT_TRUE(store_a.Put("mounts.textproto", "from a").ok());

  // A's key disappears (its lease lost) and B wins a new term.
  etcdserverpb::TxnRequest del;
  del.add_success()->mutable_request_delete_range()->set_key(a->leader_key());
  ASSERT_TRUE(client->Txn(del).ok());
  auto b = Campaign(client.get(), "b:7060", absl::Seconds(3));
  ASSERT_TRUE(
      testing::WaitFor([&] { return b->Term() != 0; }, absl::Seconds(10)));
  EXPECT_NE(a->Term(), 0);  // A does not know yet.
  EXPECT_NE(b->Term(), a->Term());
  EtcdStateStore store_b(client.get(), b.get());
  ASSERT_TRUE(store_b.Put("mounts.textproto", "from b").ok());

  absl::Status st = store_a.Put("mounts.textproto", "stale write from a");
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(st.message(), HasSubstr("term as leader is over"));
  EXPECT_EQ(store_a.refused(), 1u);
  EXPECT_EQ(store_a.Delete("mounts.textproto").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*store_b.Get("mounts.textproto"), "from b");
  // The refusal made A step down at once, not at its next renewal.
  EXPECT_TRUE(
      testing::WaitFor([&] { return a->Term() == 0; }, absl::Seconds(2)));
  EXPECT_TRUE(testing::WaitFor([&] { return a->Leader() == "b:7060"; },
                               absl::Seconds(2)));
}

TEST(LeadershipTest, ALeaderThatStopsHandsOverAtOnce) {
  auto etcd = testing::EtcdProcess::Start();
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  auto client = Client(**etcd);
  ASSERT_NE(client, nullptr);
  auto a = Campaign(client.get(), "a:7060", absl::Seconds(10));
  ASSERT_TRUE(
      testing::WaitFor([&] { return a->Term() != 0; }, absl::Seconds(10)));
  auto b = Campaign(client.get(), "b:7060", absl::Seconds(10));
  ASSERT_TRUE(testing::WaitFor([&] { return b->Leader() == "a:7060"; },
                               absl::Seconds(5)));
  const absl::Time stop = absl::Now();
  a.reset();  // Revokes its lease.
  ASSERT_TRUE(
      testing::WaitFor([&] { return b->Term() != 0; }, absl::Seconds(5)));
  // Well within the 10 s lease a dead leader would hold.
  EXPECT_LT(absl::Now() - stop, absl::Seconds(2));
}

TEST(LeadershipTest, EtcdOverTlsWithAClientCertificate) {
  auto pki = testing::Pki::Create();
  ASSERT_TRUE(pki.ok()) << pki.status();
  auto etcd = testing::EtcdProcess::Start(testing::EtcdProcess::Tls{
      (*pki)->ca(), (*pki)->node().cert, (*pki)->node().key});
  ASSERT_TRUE(etcd.ok()) << etcd.status();

  EtcdOptions tls;
  tls.ca_file = (*pki)->ca();
  tls.cert_file = (*pki)->admin().cert;
  tls.key_file = (*pki)->admin().key;
  auto good = Client(**etcd, tls);
  ASSERT_NE(good, nullptr);
  auto a = Campaign(good.get(), "a:7060", absl::Seconds(3));
  EXPECT_TRUE(
      testing::WaitFor([&] { return a->Term() != 0; }, absl::Seconds(10)));

  // No client certificate, or plain gRPC against TLS: named errors.
  EtcdOptions no_cert;
  no_cert.ca_file = (*pki)->ca();
  auto anonymous = Client(**etcd, no_cert);
  ASSERT_NE(anonymous, nullptr);
  auto r = anonymous->Range("/larder/leader");
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("etcd at 127.0.0.1"));
  auto plain = Client(**etcd);
  ASSERT_NE(plain, nullptr);
  EXPECT_FALSE(plain->Range("/larder/leader").ok());
  // A half key pair is refused before anything is dialled.
  EtcdOptions half = tls;
  half.key_file.clear();
  half.endpoints = {(*etcd)->endpoint()};
  auto bad = EtcdClient::Create(half);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("--etcd_cert_file"));
}

}  // namespace
}  // namespace larder
