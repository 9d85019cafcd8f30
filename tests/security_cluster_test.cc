// Copyright 2026 The Larder Authors.
//
// Security with real processes on loopback and real certificates made by
// `openssl` (tests/testing/pki.h): TLS refuses clients outside the cluster's
// CA, roles decide what a caller may do, an unprivileged local user (uid
// 65534, via setpriv) reads no root-only data through the CLI or a FUSE
// mount, the short-circuit socket refuses peers it does not allow (their
// reads go over gRPC), and no secret reaches a log or a command line.
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/security.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "larder/client.h"
#include "proto/master.grpc.pb.h"
#include "proto/worker.grpc.pb.h"
#include "tests/testing/pki.h"
#include "tests/testing/process.h"
#include "tests/testing/worker_process.h"

namespace larder {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kNobody[] =
    "setpriv --reuid=65534 --regid=65534 --clear-groups -- ";

std::string Larder(const std::string& args) {
  return absl::StrCat(LARDER_CLI_BINARY, " ", args);
}

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pki = testing::Pki::Create();
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = std::move(*pki);
    // The under-store: a public directory, a root-only one (0700, its file
    // 0600) and one for a group.
    ASSERT_EQ(::chmod(data_.path().c_str(), 0755), 0);
    ASSERT_TRUE(
        testing::WriteFile(data_.path() + "/public/a.txt", "public-bytes")
            .ok());
    ASSERT_TRUE(
        testing::WriteFile(data_.path() + "/private/secret.txt", "TOPSECRET-99")
            .ok());
    ASSERT_EQ(::chmod((data_.path() + "/private").c_str(), 0700), 0);
    ASSERT_EQ(::chmod((data_.path() + "/private/secret.txt").c_str(), 0600), 0);
    ASSERT_TRUE(
        testing::WriteFile(data_.path() + "/team/t.txt", "team-bytes").ok());

    std::vector<std::string> node = pki_->NodeFlags();
    node.push_back("--log_level=debug");
    std::vector<std::string> mflags = node;
    mflags.push_back(absl::StrCat("--allowed_file_roots=", data_.path()));
    auto master = testing::MasterProcess::Start(mflags);
    ASSERT_TRUE(master.ok()) << master.status();
    master_ = std::move(*master);
    std::vector<std::string> wflags = node;
    wflags.push_back(absl::StrCat("--master=", master_->address()));
    wflags.push_back(absl::StrCat("--allowed_file_roots=", data_.path()));
    wflags.push_back("--ram_capacity=64MiB");
    auto worker = testing::WorkerProcess::Start(wflags);
    ASSERT_TRUE(worker.ok()) << worker.status();
    worker_ = std::move(*worker);
    admin_ = MasterStub(pki_->Client(Role::kAdmin));
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          v1::Ring ring;
          grpc::ClientContext ctx;
          return admin_->GetRing(&ctx, v1::GetRingRequest(), &ring).ok() &&
                 ring.workers_size() == 1;
        },
        absl::Seconds(20)));
  }

  std::unique_ptr<v1::Master::Stub> MasterStub(const SecurityOptions& o) {
    auto f = ChannelFactory::Create(o);
    EXPECT_TRUE(f.ok()) << f.status();
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return v1::Master::NewStub((*f)->Channel(master_->address(), args));
  }
  std::unique_ptr<v1::WorkerData::Stub> WorkerStub(const SecurityOptions& o) {
    auto f = ChannelFactory::Create(o);
    EXPECT_TRUE(f.ok()) << f.status();
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return v1::WorkerData::NewStub((*f)->Channel(worker_->address(), args));
  }
  static grpc::Status GetRing(v1::Master::Stub& stub) {
    v1::Ring ring;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(10));
    return stub.GetRing(&ctx, v1::GetRingRequest(), &ring);
  }
  static grpc::Status GetStats(v1::WorkerData::Stub& stub) {
    v1::GetStatsResponse r;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(10));
    return stub.GetStats(&ctx, v1::GetStatsRequest(), &r);
  }
  static grpc::Status AddMount(v1::Master::Stub& stub, const std::string& path,
                               const std::string& uri, int uid = -1,
                               int gid = -1, uint32_t mode = 0) {
    v1::AddMountRequest req;
    req.mutable_mount()->set_path(path);
    req.mutable_mount()->set_uri(uri);
    if (uid >= 0) req.mutable_mount()->set_uid(static_cast<uint32_t>(uid));
    if (gid >= 0) req.mutable_mount()->set_gid(static_cast<uint32_t>(gid));
    req.mutable_mount()->set_mode(mode);
    v1::MountTable t;
    grpc::ClientContext ctx;
    return stub.AddMount(&ctx, req, &t);
  }
  void MountAll() {
    ASSERT_TRUE(AddMount(*admin_, "/ds/public",
                         absl::StrCat("file://", data_.path(), "/public"))
                    .ok());
    // Root-only: what it is in the under-store.
    ASSERT_TRUE(AddMount(*admin_, "/ds/private",
                         absl::StrCat("file://", data_.path(), "/private"), 0,
                         0, 0400)
                    .ok());
    ASSERT_TRUE(AddMount(*admin_, "/ds/team",
                         absl::StrCat("file://", data_.path(), "/team"), 0,
                         4242, 0440)
                    .ok());
  }
  std::string ClientFlags(const std::string& token_file = "") const {
    return absl::StrCat(
        "--master=", master_->address(), " --tls_ca_file=", pki_->ca(),
        token_file.empty() ? "" : absl::StrCat(" --token_file=", token_file));
  }

  testing::TempDir data_;
  std::unique_ptr<testing::Pki> pki_;
  std::unique_ptr<testing::MasterProcess> master_;
  std::unique_ptr<testing::WorkerProcess> worker_;
  std::unique_ptr<v1::Master::Stub> admin_;
};

TEST_F(SecurityTest, TlsServersRefuseClientsOutsideTheClusterCa) {
  // Plain gRPC to a TLS port.
  SecurityOptions plain;
  EXPECT_FALSE(GetRing(*MasterStub(plain)).ok());
  EXPECT_FALSE(GetStats(*WorkerStub(plain)).ok());
  // TLS, but no certificate and no token.
  SecurityOptions anonymous;
  anonymous.tls_ca_file = pki_->ca();
  grpc::Status s = GetRing(*MasterStub(anonymous));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), HasSubstr("no credentials"));
  EXPECT_THAT(s.error_message(), HasSubstr("bearer token"));
  EXPECT_THAT(s.error_message(), HasSubstr("client certificate"));
  EXPECT_EQ(GetStats(*WorkerStub(anonymous)).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // A certificate from another CA (even one naming an admin).
  SecurityOptions rogue = anonymous;
  rogue.tls_cert_file = pki_->rogue().cert;
  rogue.tls_key_file = pki_->rogue().key;
  s = GetRing(*MasterStub(rogue));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_EQ(GetStats(*WorkerStub(rogue)).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // A client that trusts another CA does not accept the servers.
  SecurityOptions distrust;
  distrust.tls_ca_file = pki_->dir() + "/otherca.pem";
  distrust.token_file = pki_->admin_token_file();
  EXPECT_FALSE(GetRing(*MasterStub(distrust)).ok());
  EXPECT_FALSE(GetStats(*WorkerStub(distrust)).ok());
  // The cluster's certificates are let in.
  SecurityOptions reader = anonymous;
  reader.tls_cert_file = pki_->reader().cert;
  reader.tls_key_file = pki_->reader().key;
  EXPECT_TRUE(GetRing(*MasterStub(reader)).ok());
  EXPECT_TRUE(GetStats(*WorkerStub(reader)).ok());

  // --tls_require_client_cert: a token alone is not enough.
  std::vector<std::string> flags = pki_->NodeFlags();
  flags.push_back("--tls_require_client_cert");
  auto strict = testing::MasterProcess::Start(flags);
  ASSERT_TRUE(strict.ok()) << strict.status();
  auto f = ChannelFactory::Create(pki_->Client(Role::kAdmin));
  ASSERT_TRUE(f.ok());
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto stub = v1::Master::NewStub((*f)->Channel((*strict)->address(), args));
  EXPECT_EQ(GetRing(*stub).error_code(), grpc::StatusCode::UNAVAILABLE);
  auto g = ChannelFactory::Create(reader);
  stub = v1::Master::NewStub((*g)->Channel((*strict)->address(), args));
  EXPECT_TRUE(GetRing(*stub).ok());
}

TEST_F(SecurityTest, RolesDecideWhatACallerMayDo) {
  const std::string uri = absl::StrCat("file://", data_.path(), "/public");
  // A reader token reads but cannot mount, invalidate or evict.
  auto reader = MasterStub(pki_->Client(Role::kReader));
  EXPECT_TRUE(GetRing(*reader).ok());
  grpc::Status s = AddMount(*reader, "/r", uri);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(),
              HasSubstr("AddMount needs the admin role; the caller's "
                        "credential has the reader role"));
  {
    v1::InvalidateRequest req;
    req.set_path("/r");
    v1::InvalidateResponse resp;
    grpc::ClientContext ctx;
    EXPECT_EQ(reader->Invalidate(&ctx, req, &resp).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    v1::EvictBlocksRequest req;
    req.set_path_prefix("/");
    v1::EvictBlocksResponse resp;
    grpc::ClientContext ctx;
    EXPECT_EQ(WorkerStub(pki_->Client(Role::kReader))
                  ->EvictBlocks(&ctx, req, &resp)
                  .error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  {  // A worker's registration is an admin's act too.
    v1::RegisterWorkerRequest req;
    req.mutable_worker()->set_id("intruder");
    req.mutable_worker()->set_address("127.0.0.1:1");
    v1::RegisterWorkerResponse resp;
    grpc::ClientContext ctx;
    EXPECT_EQ(reader->RegisterWorker(&ctx, req, &resp).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  // A wrong token is refused, without being echoed.
  const std::string wrong = pki_->dir() + "/wrong.token";
  ASSERT_TRUE(testing::WriteFile(wrong, "not-a-valid-token-123456\n").ok());
  SecurityOptions bad = pki_->Client(Role::kNone);
  bad.token_file = wrong;
  s = GetRing(*MasterStub(bad));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), Not(HasSubstr("not-a-valid-token")));
  // The admin token and the admin certificate may mount.
  EXPECT_TRUE(AddMount(*admin_, "/a1", uri).ok());
  SecurityOptions admin_cert = pki_->Client(Role::kNone);
  admin_cert.tls_cert_file = pki_->admin().cert;
  admin_cert.tls_key_file = pki_->admin().key;
  EXPECT_TRUE(AddMount(*MasterStub(admin_cert), "/a2", uri).ok());
  SecurityOptions reader_cert = pki_->Client(Role::kNone);
  reader_cert.tls_cert_file = pki_->reader().cert;
  reader_cert.tls_key_file = pki_->reader().key;
  EXPECT_EQ(AddMount(*MasterStub(reader_cert), "/a3", uri).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // The client library: a reader reads; no credential is a clear error.
  ClientOptions co;
  co.master = master_->address();
  co.node = "elsewhere";  // Over gRPC.
  co.security = pki_->Client(Role::kReader);
  auto client = Client::Connect(co);
  ASSERT_TRUE(client.ok()) << client.status();
  auto file = (*client)->Open("/a1/a.txt");
  ASSERT_TRUE(file.ok()) << file.status();
  std::string buf(64, '\0');
  auto n = (*file)->Read(0, absl::MakeSpan(buf));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(buf.substr(0, *n), "public-bytes");
  co.security = pki_->Client(Role::kNone);
  auto none = Client::Connect(co);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(SecurityTest, TheCliNamesTheMissingCredentialAndExitsWith4) {
  const std::string uri = absl::StrCat("file://", data_.path(), "/public");
  testing::Shell r = testing::Sh(Larder(absl::StrCat(
      "mount /x ", uri, " ", ClientFlags(pki_->reader_token_file()))));
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_THAT(r.out, HasSubstr("AddMount needs the admin role"));
  EXPECT_THAT(r.out, Not(HasSubstr(pki_->reader_token())));
  r = testing::Sh(Larder(absl::StrCat("ls / ", ClientFlags())));
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_THAT(r.out, HasSubstr("no credentials"));
  // The environment carries a token as well as a file.
  r = testing::Sh(
      absl::StrCat("LARDER_TOKEN=", pki_->admin_token(), " ",
                   Larder(absl::StrCat("mount /x ", uri, " ", ClientFlags()))));
  EXPECT_EQ(r.code, 0) << r.out;
  // TLS missing on the client: named as a TLS problem.
  r = testing::Sh(
      Larder(absl::StrCat("ring --master=", master_->address(),
                          " --token_file=", pki_->reader_token_file())));
  EXPECT_EQ(r.code, 5) << r.out;
  EXPECT_THAT(r.out, HasSubstr("if it serves TLS, set --tls_ca_file"));
  // An unreadable token file names the file.
  r = testing::Sh(
      Larder(absl::StrCat("ring ", ClientFlags(pki_->dir() + "/nope"))));
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("cannot read token file"));
}

TEST_F(SecurityTest, AnUnprivilegedUserReadsNoRootOnlyData) {
  MountAll();
  // Without a token (root's token files are 0600), nothing: not a mount,
  // not a read, even of the public data.
  for (const std::string& args :
       {absl::StrCat("mount /pwn file://", data_.path(), "/private"),
        std::string("cat /ds/private/secret.txt"),
        std::string("cat /ds/public/a.txt")}) {
    testing::Shell r =
        testing::Sh(absl::StrCat(kNobody, Larder(args), " ", ClientFlags()));
    EXPECT_EQ(r.code, 4) << args << ": " << r.out;
    EXPECT_THAT(r.out, Not(HasSubstr("TOPSECRET")));
  }
  testing::Shell r =
      testing::Sh(absl::StrCat(kNobody, Larder("mount /pwn file:///etc"), " ",
                               ClientFlags(pki_->admin_token_file())));
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_THAT(r.out, HasSubstr("cannot read token file"));

  // Through FUSE (allow_other, default_permissions), run by root: the
  // mount's owner and mode decide.
  auto fuse = testing::FuseProcess::Start(
      master_->address(),
      {absl::StrCat("--tls_ca_file=", pki_->ca()),
       absl::StrCat("--tls_cert_file=", pki_->reader().cert),
       absl::StrCat("--tls_key_file=", pki_->reader().key)});
  ASSERT_TRUE(fuse.ok()) << fuse.status();
  const std::string mnt = (*fuse)->mountpoint();
  ASSERT_EQ(::chmod(std::filesystem::path(mnt).parent_path().c_str(), 0755), 0);
  r = testing::Sh(absl::StrCat(kNobody, "cat ", mnt, "/ds/public/a.txt"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "public-bytes");
  r = testing::Sh(absl::StrCat(kNobody, "cat ", mnt, "/ds/private/secret.txt"));
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("Permission denied"));
  EXPECT_THAT(r.out, Not(HasSubstr("TOPSECRET")));
  r = testing::Sh(absl::StrCat("stat -c '%u %g %a' ", mnt,
                               "/ds/private/secret.txt ", mnt, "/ds/team ", mnt,
                               "/ds/team/t.txt"));
  EXPECT_EQ(r.out, "0 0 400\n0 4242 550\n0 4242 440\n");
  // The group's members read the group's dataset; others do not.
  r = testing::Sh(
      absl::StrCat("setpriv --reuid=65534 --regid=4242 --clear-groups -- cat ",
                   mnt, "/ds/team/t.txt"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "team-bytes");
  r = testing::Sh(absl::StrCat(kNobody, "cat ", mnt, "/ds/team/t.txt"));
  EXPECT_NE(r.code, 0) << r.out;
  // Root still reads it (as the under-store would let it).
  r = testing::Sh(absl::StrCat("cat ", mnt, "/ds/private/secret.txt"));
  EXPECT_EQ(r.out, "TOPSECRET-99");
}

TEST_F(SecurityTest,
       ShortCircuitRefusesPeersItDoesNotAllowAndTheyReadOverGrpc) {
  MountAll();
  const std::string grpc_bytes =
      "larder_worker_served_path_bytes_total{path=\"grpc\"}";
  const std::string sc_bytes =
      "larder_worker_served_path_bytes_total{path=\"short_circuit\"}";
  struct stat st;
  ASSERT_EQ(::stat(worker_->socket_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  // As root (allowed): short-circuit.
  const std::string cat =
      Larder(absl::StrCat("cat /ds/public/a.txt ", ClientFlags()));
  testing::Shell r = testing::Sh(
      absl::StrCat("LARDER_TOKEN=", pki_->reader_token(), " ", cat));
  ASSERT_EQ(r.code, 0) << r.out;
  const double sc0 = worker_->Metric(sc_bytes).value_or(0);
  const double grpc0 = worker_->Metric(grpc_bytes).value_or(0);
  EXPECT_GT(sc0, 0);
  // A socket whose mode lets anyone connect (a mistake): the peer check
  // still refuses uid 65534, whose read goes over gRPC with its token.
  ASSERT_EQ(
      ::chmod(
          std::filesystem::path(worker_->socket_path()).parent_path().c_str(),
          0755),
      0);
  ASSERT_EQ(::chmod(worker_->socket_path().c_str(), 0666), 0);
  for (int i = 0; i < 2; ++i) {
    r = testing::Sh(
        absl::StrCat("LARDER_TOKEN=", pki_->reader_token(), " ", kNobody, cat));
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_THAT(r.out, HasSubstr("public-bytes"));
    EXPECT_THAT(r.out, HasSubstr("client.short_circuit_refused"));
  }
  EXPECT_EQ(worker_->Metric(sc_bytes).value_or(0), sc0);
  EXPECT_GE(worker_->Metric(grpc_bytes).value_or(0), grpc0 + 2 * 12);
  auto log = testing::ReadFile(worker_->log_path());
  ASSERT_TRUE(log.ok());
  size_t refusals = 0;
  for (size_t at = log->find("short_circuit.refused"); at != std::string::npos;
       at = log->find("short_circuit.refused", at + 1))
    ++refusals;
  EXPECT_EQ(refusals, 1u) << "logged once per uid";
  EXPECT_THAT(*log, HasSubstr("uid 65534"));
  // Without the reader token the gRPC path refuses it too.
  r = testing::Sh(absl::StrCat(kNobody, cat));
  EXPECT_EQ(r.code, 4) << r.out;
}

// The short-circuit socket lends a block only to a caller whom the mount's
// owner, group and mode let read it (the FUSE view's rule), whatever socket
// permissions let the caller connect; supplementary groups count, from
// SO_PEERGROUPS.
TEST_F(SecurityTest, ShortCircuitLendsOnlyBlocksOfMountsTheCallerMayRead) {
  MountAll();
  // A second worker that lets uid 65534 onto its socket.
  std::vector<std::string> wflags = pki_->NodeFlags();
  wflags.push_back(absl::StrCat("--master=", master_->address()));
  wflags.push_back(absl::StrCat("--allowed_file_roots=", data_.path()));
  wflags.push_back("--short_circuit_allowed_uids=65534");
  auto worker = testing::WorkerProcess::Start(wflags);
  ASSERT_TRUE(worker.ok()) << worker.status();
  const std::string sock = (*worker)->socket_path();
  ASSERT_EQ(::chmod(std::filesystem::path(sock).parent_path().c_str(), 0755),
            0);
  ASSERT_EQ(::chmod(sock.c_str(), 0666), 0);
  auto probe = [&](const std::string& user, const std::string& mount,
                   const std::string& dir, const std::string& file) {
    struct stat st;
    const std::string local = absl::StrCat(data_.path(), "/", dir, "/", file);
    EXPECT_EQ(::stat(local.c_str(), &st), 0);
    const std::string version = absl::StrCat(
        absl::ToUnixNanos(absl::TimeFromTimespec(st.st_mtim)), "-", st.st_size);
    return testing::Sh(absl::StrCat(user, SHORT_CIRCUIT_PROBE, " ", sock, " ",
                                    mount, " ", file, " ", version, " 0 ",
                                    4 << 20, " ", st.st_size, " 2>&1"));
  };
  const std::string group =
      "setpriv --reuid=65534 --regid=4242 --clear-groups -- ";
  const std::string supplementary =
      "setpriv --reuid=65534 --regid=65534 --groups=4242 -- ";
  testing::Shell r = probe("", "/ds/team", "team", "t.txt");
  EXPECT_EQ(r.out, "team-bytes");  // Root.
  r = probe(kNobody, "/ds/public", "public", "a.txt");
  EXPECT_EQ(r.out, "public-bytes");
  r = probe(kNobody, "/ds/team", "team", "t.txt");
  EXPECT_THAT(r.out, HasSubstr("PERMISSION_DENIED"));
  EXPECT_THAT(r.out, HasSubstr("may not read mount '/ds/team'"));
  EXPECT_THAT(r.out, Not(HasSubstr("team-bytes")));
  r = probe(kNobody, "/ds/private", "private", "secret.txt");
  EXPECT_THAT(r.out, HasSubstr("PERMISSION_DENIED"));
  EXPECT_THAT(r.out, Not(HasSubstr("TOPSECRET")));
  r = probe(group, "/ds/team", "team", "t.txt");
  EXPECT_EQ(r.out, "team-bytes");
  r = probe(supplementary, "/ds/team", "team", "t.txt");
  EXPECT_EQ(r.out, "team-bytes");
  r = probe(group, "/ds/private", "private", "secret.txt");
  EXPECT_THAT(r.out, HasSubstr("PERMISSION_DENIED"));

  // The node metadata cache (STAT) answers by the same rule; what it does
  // not answer, the caller asks the master, where its token decides.
  auto stat = [&](const std::string& user, const std::string& path) {
    return testing::Sh(absl::StrCat(user, SHORT_CIRCUIT_PROBE, " ", sock,
                                    " stat ", path, " 2>&1"));
  };
  r = stat("", "/ds/team/t.txt");
  EXPECT_THAT(r.out, HasSubstr("10 "));  // Root: "team-bytes" is 10 bytes.
  r = stat(kNobody, "/ds/public/a.txt");
  EXPECT_EQ(r.code, 0) << r.out;
  r = stat(kNobody, "/ds/team/t.txt");
  EXPECT_THAT(r.out, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(r.out, HasSubstr("may not see it"));
  r = stat(group, "/ds/team/t.txt");
  EXPECT_EQ(r.code, 0) << r.out;
  r = stat(kNobody, "/ds/private/secret.txt");
  EXPECT_THAT(r.out, HasSubstr("FAILED_PRECONDITION"));
  // A mount whose files keep their own modes answers what stat(2) would:
  // whether a path exists where the way there is open to the caller.
  r = stat(kNobody, "/ds/public/none.txt");
  EXPECT_THAT(r.out, HasSubstr("NOT_FOUND"));
  r = stat("", "/ds/public/none.txt");
  EXPECT_THAT(r.out, HasSubstr("NOT_FOUND"));
  r = stat(kNobody, "/elsewhere/x");
  EXPECT_THAT(r.out, HasSubstr("FAILED_PRECONDITION"));

  // Listings (LIST) by the same rule: the worker asks the master, and
  // answers only callers who may list the directory.
  auto list = [&](const std::string& user, const std::string& path) {
    return testing::Sh(absl::StrCat(user, SHORT_CIRCUIT_PROBE, " ", sock,
                                    " list ", path, " 2>&1"));
  };
  r = list(kNobody, "/ds/public");
  EXPECT_EQ(r.out, "/ds/public/a.txt\n");
  r = list(kNobody, "/ds/team");
  EXPECT_THAT(r.out, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(r.out, Not(HasSubstr("t.txt")));
  r = list(group, "/ds/team");
  EXPECT_EQ(r.out, "/ds/team/t.txt\n");
  r = list(kNobody, "/ds/private");
  EXPECT_THAT(r.out, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(r.out, Not(HasSubstr("secret.txt")));
  r = list("", "/ds/private");
  EXPECT_EQ(r.out, "/ds/private/secret.txt\n");
}

// Resources before authentication: 20 callers with no credential each send
// a 60 MB request at once. The master refuses them without holding them:
// its RSS grows by less than 100 MB.
TEST_F(SecurityTest, UnauthenticatedLargeRequestsDoNotGrowTheMaster) {
  auto rss = [&]() -> int64_t {
    auto status =
        testing::ReadFile(absl::StrCat("/proc/", master_->pid(), "/status"));
    if (!status.ok()) return -1;
    const size_t at = status->find("VmRSS:");
    if (at == std::string::npos) return -1;
    return std::strtoll(status->c_str() + at + 6, nullptr, 10) * 1024;
  };
  const int64_t before = rss();
  ASSERT_GT(before, 0);
  const SecurityOptions anonymous = pki_->Client(Role::kNone);
  std::atomic<int64_t> peak{before};
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done) {
      const int64_t now = rss();
      if (now > peak) peak = now;
      absl::SleepFor(absl::Milliseconds(5));
    }
  });
  std::vector<std::thread> callers;
  std::atomic<int> refused{0};
  for (int i = 0; i < 20; ++i) {
    callers.emplace_back([&] {
      auto stub = MasterStub(anonymous);
      v1::RegisterWorkerRequest req;
      req.mutable_worker()->set_id("intruder");
      req.set_cached_keys(std::string(60 << 20, 'k'));
      v1::RegisterWorkerResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(60));
      grpc::Status st = stub->RegisterWorker(&ctx, req, &resp);
      refused += !st.ok();
    });
  }
  for (auto& t : callers) t.join();
  done = true;
  sampler.join();
  EXPECT_EQ(refused, 20);
  std::printf("master RSS %.1f MB -> peak %.1f MB\n", before / 1e6,
              peak.load() / 1e6);
  EXPECT_LT(peak - before, 100 << 20)
      << "RSS " << before << " -> peak " << peak.load();
  EXPECT_TRUE(GetRing(*admin_).ok());  // Still serving.
}

TEST_F(SecurityTest, NoSecretReachesALogOrACommandLine) {
  MountAll();
  // Successes and refusals, with every daemon at --log_level=debug.
  testing::Sh(Larder(absl::StrCat("cat /ds/public/a.txt --log_level=debug ",
                                  ClientFlags(pki_->reader_token_file()))));
  testing::Sh(Larder(absl::StrCat("mount /y file:///etc --log_level=debug ",
                                  ClientFlags(pki_->reader_token_file()))));
  const std::string wrong = pki_->dir() + "/wrong.token";
  ASSERT_TRUE(testing::WriteFile(wrong, "wrong-token-abcdefgh-1234\n").ok());
  testing::Shell cli = testing::Sh(
      Larder(absl::StrCat("ls / --log_level=debug ", ClientFlags(wrong))));
  EXPECT_EQ(cli.code, 4);
  EXPECT_THAT(cli.out, Not(HasSubstr("wrong-token-abcdefgh")));

  std::vector<std::string> secrets = {pki_->admin_token(),
                                      pki_->reader_token()};
  // The body of every private key (its base64 lines).
  for (const std::string& key :
       {pki_->node().key, pki_->admin().key, pki_->reader().key}) {
    auto text = testing::ReadFile(key);
    ASSERT_TRUE(text.ok());
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      if (line.size() > 20 && line[0] != '-') secrets.emplace_back(line);
    }
  }
  ASSERT_GT(secrets.size(), 4u);
  for (const std::string& path : {master_->log_path(), worker_->log_path()}) {
    auto log = testing::ReadFile(path);
    ASSERT_TRUE(log.ok());
    if (path == master_->log_path()) {
      EXPECT_THAT(*log, HasSubstr("auth.refused"));
    }
    for (const std::string& s : secrets)
      EXPECT_THAT(*log, Not(HasSubstr(s))) << path;
  }
  for (pid_t pid : {master_->pid(), worker_->pid()}) {
    auto cmdline = testing::ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
    ASSERT_TRUE(cmdline.ok());
    EXPECT_THAT(*cmdline, HasSubstr("--auth_tokens_file="));
    for (const std::string& s : secrets)
      EXPECT_THAT(*cmdline, Not(HasSubstr(s)));
  }
}

// A master and a worker started with no authentication flag, serving
// file:// mounts under `root`, the worker in the ring.
struct DefaultCluster {
  std::unique_ptr<testing::MasterProcess> master;
  std::unique_ptr<testing::WorkerProcess> worker;
  std::string at;  // " --master=ADDRESS", for the CLI.
};
void StartDefaultCluster(const std::string& root,
                         std::vector<std::string> worker_flags,
                         DefaultCluster* out) {
  const std::string roots = absl::StrCat("--allowed_file_roots=", root);
  auto master = testing::MasterProcess::Start({roots});
  ASSERT_TRUE(master.ok()) << master.status();
  out->master = std::move(*master);
  out->at = absl::StrCat(" --master=", out->master->address());
  worker_flags.push_back(absl::StrCat("--master=", out->master->address()));
  worker_flags.push_back(roots);
  worker_flags.push_back("--ram_capacity=64MiB");
  auto worker = testing::WorkerProcess::Start(worker_flags);
  ASSERT_TRUE(worker.ok()) << worker.status();
  out->worker = std::move(*worker);
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return testing::Sh(Larder(absl::StrCat("ring", out->at)))
                   .out.find(out->worker->address()) != std::string::npos;
      },
      absl::Seconds(20)));
}

// Secure on a shared host by default: a cluster started with no
// authentication flag keeps an admin token in a 0600 file that root's CLI
// finds by itself. uid 65534 may neither mount nor read a root-only file of
// a file:// mount (which shows each file's own owner and mode, as a bind
// mount would), by the CLI or through FUSE; root can, with no flag added.
TEST(DefaultSecurityTest, OnlyRootAdministersAndFileModesDecideReads) {
  testing::TempDir data;
  ASSERT_EQ(::chmod(data.path().c_str(), 0755), 0);
  ASSERT_TRUE(
      testing::WriteFile(data.path() + "/public/a.txt", "public-bytes").ok());
  ASSERT_TRUE(
      testing::WriteFile(data.path() + "/private/secret.txt", "TOPSECRET-99")
          .ok());
  ASSERT_TRUE(
      testing::WriteFile(data.path() + "/public/mine.txt", "root-only-bytes")
          .ok());
  ASSERT_EQ(::chmod((data.path() + "/public").c_str(), 0755), 0);
  ASSERT_EQ(::chmod((data.path() + "/public/a.txt").c_str(), 0644), 0);
  ASSERT_EQ(::chmod((data.path() + "/public/mine.txt").c_str(), 0600), 0);
  ASSERT_EQ(::chmod((data.path() + "/private").c_str(), 0700), 0);
  ASSERT_EQ(::chmod((data.path() + "/private/secret.txt").c_str(), 0644), 0);
  DefaultCluster cluster;
  StartDefaultCluster(data.path(), {}, &cluster);
  if (HasFatalFailure()) return;
  const std::string& at = cluster.at;
  testing::MasterProcess* master = cluster.master.get();

  // Root, no flag: an admin.
  testing::Shell r =
      testing::Sh(Larder(absl::StrCat("mount /ds file://", data.path(), at)));
  ASSERT_EQ(r.code, 0) << r.out;
  struct stat st;
  ASSERT_EQ(::stat(DefaultAdminTokenPath().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // uid 65534: a reader, of what the files' modes let anyone read.
  r = testing::Sh(absl::StrCat(
      kNobody,
      Larder(absl::StrCat("mount /pwn file://", data.path(), "/private", at))));
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_THAT(r.out, HasSubstr("AddMount needs the admin role"));
  r = testing::Sh(
      absl::StrCat(kNobody, Larder(absl::StrCat("cat /ds/public/a.txt", at))));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("public-bytes"));
  for (const char* path : {"/ds/private/secret.txt", "/ds/public/mine.txt"}) {
    r = testing::Sh(
        absl::StrCat(kNobody, Larder(absl::StrCat("cat ", path, at))));
    EXPECT_NE(r.code, 0) << path << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr("a caller without credentials may not"))
        << path;
    EXPECT_THAT(r.out, Not(HasSubstr("TOPSECRET")));
    EXPECT_THAT(r.out, Not(HasSubstr("root-only-bytes")));
  }
  r = testing::Sh(Larder(absl::StrCat("cat /ds/private/secret.txt", at)));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("TOPSECRET-99"));

  // Through FUSE, run by root: each file's and directory's own owner and
  // mode, which the kernel enforces.
  auto fuse = testing::FuseProcess::Start(master->address());
  ASSERT_TRUE(fuse.ok()) << fuse.status();
  const std::string mnt = (*fuse)->mountpoint();
  ASSERT_EQ(::chmod(std::filesystem::path(mnt).parent_path().c_str(), 0755), 0);
  r = testing::Sh(absl::StrCat("stat -c '%u %a' ", mnt, "/ds/private ", mnt,
                               "/ds/private/secret.txt ", mnt,
                               "/ds/public/mine.txt"));
  EXPECT_EQ(r.out, "0 500\n0 444\n0 400\n");
  r = testing::Sh(absl::StrCat(kNobody, "cat ", mnt, "/ds/public/a.txt"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "public-bytes");
  for (const char* path : {"/ds/private/secret.txt", "/ds/public/mine.txt"}) {
    r = testing::Sh(absl::StrCat(kNobody, "cat ", mnt, path));
    EXPECT_NE(r.code, 0) << path;
    EXPECT_THAT(r.out, HasSubstr("Permission denied")) << path;
    EXPECT_THAT(r.out, Not(HasSubstr("TOPSECRET")));
    EXPECT_THAT(r.out, Not(HasSubstr("root-only-bytes")));
  }
  r = testing::Sh(absl::StrCat("cat ", mnt, "/ds/private/secret.txt"));
  EXPECT_EQ(r.out, "TOPSECRET-99");
}

// Names are data too: with no authentication configured, a caller without
// credentials is shown what a mount's (or, for a mount whose files keep
// their own modes, each directory's) "other" bits let anyone list or search,
// by the master as by the workers. A local user's own private directory is
// listed for it by its local worker, which knows its uid.
TEST(DefaultSecurityTest, NamesAUserMayNotListStayHidden) {
  testing::TempDir data;
  ASSERT_EQ(::chmod(data.path().c_str(), 0755), 0);
  ASSERT_TRUE(testing::WriteFile(data.path() + "/public/a.txt", "a").ok());
  ASSERT_TRUE(
      testing::WriteFile(data.path() + "/private/layoffs-2027.xlsx", "x").ok());
  ASSERT_TRUE(
      testing::WriteFile(data.path() + "/home/own-notes.txt", "o").ok());
  ASSERT_EQ(::chmod((data.path() + "/private").c_str(), 0700), 0);
  ASSERT_EQ(::chmod((data.path() + "/home").c_str(), 0700), 0);
  ASSERT_EQ(::chown((data.path() + "/home").c_str(), 65534, 65534), 0);
  ASSERT_EQ(
      ::chown((data.path() + "/home/own-notes.txt").c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chmod((data.path() + "/home/own-notes.txt").c_str(), 0600), 0);
  DefaultCluster cluster;
  StartDefaultCluster(data.path(), {"--short_circuit_allowed_uids=65534"},
                      &cluster);
  if (HasFatalFailure()) return;
  const std::string& at = cluster.at;
  testing::MasterProcess* master = cluster.master.get();
  const std::string sock = cluster.worker->socket_path();
  ASSERT_EQ(::chmod(std::filesystem::path(sock).parent_path().c_str(), 0755),
            0);
  ASSERT_EQ(::chmod(sock.c_str(), 0666), 0);
  testing::Shell r =
      testing::Sh(Larder(absl::StrCat("mount /ds file://", data.path(), at)));
  ASSERT_EQ(r.code, 0) << r.out;
  // A mount of its own mode: root's only.
  r = testing::Sh(Larder(absl::StrCat(
      "mount /locked file://", data.path(),
      "/public --owner_uid=0 --owner_gid=0 --file_mode=0700", at)));
  ASSERT_EQ(r.code, 0) << r.out;

  // The master, asked by a caller with no credentials at all.
  auto channels = ChannelFactory::Insecure();
  auto anonymous = v1::Master::NewStub(channels->Channel(master->address()));
  auto list = [&](const std::string& path, bool recursive,
                  v1::ListResponse* resp) {
    v1::ListRequest req;
    req.set_path(path);
    req.set_recursive(recursive);
    grpc::ClientContext ctx;
    return anonymous->List(&ctx, req, resp);
  };
  auto stat = [&](const std::string& path) {
    v1::StatRequest req;
    req.set_path(path);
    v1::StatResponse resp;
    grpc::ClientContext ctx;
    return anonymous->Stat(&ctx, req, &resp);
  };
  v1::ListResponse page;
  grpc::Status st = list("/ds/private", false, &page);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(st.error_message(),
              HasSubstr("a caller without credentials may not list"));
  EXPECT_EQ(page.entries_size(), 0);
  EXPECT_EQ(stat("/ds/private/layoffs-2027.xlsx").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(stat("/ds/private/none").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);  // Nor what is not there.
  EXPECT_TRUE(stat("/ds/private").ok());  // Its own name is the root's.
  EXPECT_TRUE(stat("/ds/public/a.txt").ok());
  page.Clear();
  ASSERT_TRUE(list("/ds", true, &page).ok());
  std::string names;
  for (const auto& e : page.entries()) names += e.path() + "\n";
  EXPECT_THAT(names, HasSubstr("/ds/public/a.txt"));
  EXPECT_THAT(names, Not(HasSubstr("layoffs")));
  EXPECT_THAT(names, Not(HasSubstr("own-notes")));
  // Page by page: no page token names a hidden path either (a recursive
  // page's token is the path of its last entry).
  std::string token, seen;
  for (int pages = 0; pages < 20; ++pages) {
    v1::ListRequest req;
    req.set_path("/ds");
    req.set_recursive(true);
    req.set_page_size(1);
    req.set_page_token(token);
    v1::ListResponse one;
    grpc::ClientContext ctx;
    ASSERT_TRUE(anonymous->List(&ctx, req, &one).ok());
    for (const auto& e : one.entries()) seen += e.path() + "\n";
    token = one.next_page_token();
    seen += "token " + token + "\n";
    if (token.empty()) break;
  }
  EXPECT_TRUE(token.empty()) << seen;
  EXPECT_THAT(seen, HasSubstr("/ds/public/a.txt"));
  EXPECT_THAT(seen, Not(HasSubstr("layoffs")));
  EXPECT_THAT(seen, Not(HasSubstr("own-notes")));
  EXPECT_EQ(list("/locked", false, &page).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(stat("/locked/a.txt").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(stat("/locked").ok());

  // The CLI as uid 65534 (no credentials: its local worker answers for
  // it by its uid).
  r = testing::Sh(
      absl::StrCat(kNobody, Larder(absl::StrCat("ls /ds/private", at))));
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("may not list"));
  EXPECT_THAT(r.out, Not(HasSubstr("layoffs")));
  r = testing::Sh(absl::StrCat(
      kNobody, Larder(absl::StrCat("stat /ds/private/layoffs-2027.xlsx", at))));
  EXPECT_NE(r.code, 0) << r.out;
  r = testing::Sh(
      absl::StrCat(kNobody, Larder(absl::StrCat("ls /ds/home", at))));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("own-notes.txt"));
  r = testing::Sh(absl::StrCat(
      kNobody, Larder(absl::StrCat("stat /ds/home/own-notes.txt", at))));
  EXPECT_EQ(r.code, 0) << r.out;
  r = testing::Sh(
      absl::StrCat(kNobody, Larder(absl::StrCat("ls /ds --recursive", at))));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("a.txt"));
  EXPECT_THAT(r.out, HasSubstr("own-notes.txt"));
  EXPECT_THAT(r.out, Not(HasSubstr("layoffs")));
  // Root: an admin, shown everything.
  r = testing::Sh(Larder(absl::StrCat("ls /ds/private", at)));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("layoffs-2027.xlsx"));
}

// The invalidation log names every path written or invalidated, and every
// client follows it: a caller without credentials is told of each path as
// it may see it: a name it may not list as the directory that hides it (so
// what it cached below goes too), a path of a mount it may not read as the
// mount, one of a mount removed since as its first component. An admin (the
// workers' metadata caches) is told every path.
TEST(DefaultSecurityTest, InvalidationsNameOnlyWhatACallerMaySee) {
  testing::TempDir data;
  ASSERT_EQ(::chmod(data.path().c_str(), 0755), 0);
  ASSERT_TRUE(testing::WriteFile(data.path() + "/public/a.txt", "a").ok());
  ASSERT_TRUE(
      testing::WriteFile(data.path() + "/private/layoffs-2027.xlsx", "x").ok());
  ASSERT_TRUE(
      testing::WriteFile(data.path() + "/private/inner/deep.txt", "d").ok());
  ASSERT_EQ(::chmod((data.path() + "/public").c_str(), 0755), 0);
  ASSERT_EQ(::chmod((data.path() + "/private").c_str(), 0700), 0);
  DefaultCluster cluster;
  StartDefaultCluster(data.path(), {}, &cluster);
  if (HasFatalFailure()) return;
  const std::string& at = cluster.at;
  testing::Shell r =
      testing::Sh(Larder(absl::StrCat("mount /ds file://", data.path(), at)));
  ASSERT_EQ(r.code, 0) << r.out;
  r = testing::Sh(Larder(absl::StrCat(
      "mount /locked file://", data.path(),
      "/public --owner_uid=0 --owner_gid=0 --file_mode=0700", at)));
  ASSERT_EQ(r.code, 0) << r.out;
  r = testing::Sh(Larder(
      absl::StrCat("mount /old/private file://", data.path(), "/private", at)));
  ASSERT_EQ(r.code, 0) << r.out;

  auto channels = ChannelFactory::Insecure();
  auto stub = v1::Master::NewStub(channels->Channel(cluster.master->address()));
  v1::Ring ring;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->GetRing(&ctx, v1::GetRingRequest(), &ring).ok());
  }
  std::vector<std::string> invalidated = {"/ds/public/a.txt",
                                          "/ds/public/gone.txt",
                                          "/ds/private/layoffs-2027.xlsx",
                                          "/ds/private/inner/deep.txt",
                                          "/ds/private/gone.txt",
                                          "/locked/a.txt",
                                          "/ds",
                                          "/old/private/layoffs-2027.xlsx"};
  for (const std::string& p : invalidated) {
    r = testing::Sh(Larder(absl::StrCat("invalidate ", p, at)));
    ASSERT_EQ(r.code, 0) << p << ": " << r.out;
  }
  // A mount removed since: its paths in the log no longer resolve.
  r = testing::Sh(Larder(absl::StrCat("unmount /old/private", at)));
  ASSERT_EQ(r.code, 0) << r.out;
  invalidated.push_back("/old/private");
  auto told = [&](bool admin) {
    v1::GetInvalidationsRequest req;
    req.set_epoch(ring.metadata_epoch());
    req.set_after_seq(ring.invalidation_seq());
    v1::GetInvalidationsResponse resp;
    grpc::ClientContext ctx;
    if (admin) {
      absl::StatusOr<std::string> token =
          testing::ReadFile(DefaultAdminTokenPath());
      EXPECT_TRUE(token.ok()) << token.status();
      ctx.AddMetadata("larder-local-admin",
                      std::string(absl::StripAsciiWhitespace(
                          token.ok() ? *token : std::string())));
    }
    grpc::Status st = stub->GetInvalidations(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_FALSE(resp.reset());
    return std::vector<std::string>(resp.paths().begin(), resp.paths().end());
  };
  EXPECT_THAT(
      told(/*admin=*/false),
      ::testing::UnorderedElementsAre("/ds/public/a.txt", "/ds/public/gone.txt",
                                      "/ds/private", "/ds", "/locked", "/old"));
  EXPECT_THAT(told(/*admin=*/true),
              ::testing::UnorderedElementsAreArray(invalidated));
}

// A reader token limited to a mount reads that mount only, over gRPC: the
// master neither lists nor stats the others for it, and the workers refuse
// their blocks (and prefetching them).
TEST(ScopedTokenTest, AReaderTokenLimitedToAMountReadsThatMountOnly) {
  testing::TempDir data;
  ASSERT_EQ(::chmod(data.path().c_str(), 0755), 0);
  ASSERT_TRUE(
      testing::WriteFile(data.path() + "/public/a.txt", "public-bytes").ok());
  ASSERT_TRUE(
      testing::WriteFile(data.path() + "/team/t.txt", "team-bytes").ok());
  const std::string admin = "admin-0123456789abcdef";
  const std::string scoped = "scoped-0123456789abcdef";
  ASSERT_TRUE(
      testing::WriteFile(
          data.path() + "/tokens",
          absl::StrCat("admin ", admin, "\nreader:/ds/public ", scoped, "\n"))
          .ok());
  ASSERT_TRUE(testing::WriteFile(data.path() + "/admin.token", admin).ok());
  ASSERT_EQ(::chmod((data.path() + "/tokens").c_str(), 0600), 0);
  const std::string roots = absl::StrCat("--allowed_file_roots=", data.path());
  const std::string tokens =
      absl::StrCat("--auth_tokens_file=", data.path(), "/tokens");
  auto master = testing::MasterProcess::Start({roots, tokens});
  ASSERT_TRUE(master.ok()) << master.status();
  auto worker = testing::WorkerProcess::Start(
      {absl::StrCat("--master=", (*master)->address()), roots, tokens,
       absl::StrCat("--token_file=", data.path(), "/admin.token")});
  ASSERT_TRUE(worker.ok()) << worker.status();
  const std::string at = absl::StrCat(" --master=", (*master)->address());
  const std::string as_admin = absl::StrCat("LARDER_TOKEN=", admin, " ");
  for (const char* m : {"public", "team"}) {
    testing::Shell r = testing::Sh(
        absl::StrCat(as_admin, Larder(absl::StrCat("mount /ds/", m, " file://",
                                                   data.path(), "/", m, at))));
    ASSERT_EQ(r.code, 0) << r.out;
  }
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return testing::Sh(
                   absl::StrCat(as_admin, Larder(absl::StrCat("ring", at))))
                   .out.find((*worker)->address()) != std::string::npos;
      },
      absl::Seconds(20)));
  // uid 65534 may not use the socket: every read is a gRPC read with the
  // scoped token.
  const std::string as_scoped =
      absl::StrCat("LARDER_TOKEN=", scoped, " ", kNobody);
  testing::Shell r = testing::Sh(absl::StrCat(
      as_scoped, Larder(absl::StrCat("cat /ds/public/a.txt", at))));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("public-bytes"));
  r = testing::Sh(
      absl::StrCat(as_scoped, Larder(absl::StrCat("cat /ds/team/t.txt", at))));
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_THAT(r.out, HasSubstr("reads /ds/public only"));
  EXPECT_THAT(r.out, Not(HasSubstr("team-bytes")));
  r = testing::Sh(absl::StrCat(as_scoped, Larder(absl::StrCat("ls /ds", at))));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("public"));
  EXPECT_THAT(r.out, Not(HasSubstr("team")));
  r = testing::Sh(absl::StrCat(as_scoped, Larder(absl::StrCat("mount", at))));
  EXPECT_THAT(r.out, Not(HasSubstr("/ds/team")));

  // The worker itself refuses the team's block to that token, whatever the
  // request says: asked directly, with a block id the admin's stat gives.
  SecurityOptions o;
  ASSERT_TRUE(testing::WriteFile(data.path() + "/scoped.token", scoped).ok());
  o.token_file = data.path() + "/scoped.token";
  auto channels = ChannelFactory::Create(o);
  ASSERT_TRUE(channels.ok()) << channels.status();
  auto stub =
      v1::WorkerData::NewStub((*channels)->Channel((*worker)->address()));
  struct stat st;
  ASSERT_EQ(::stat((data.path() + "/team/t.txt").c_str(), &st), 0);
  v1::ReadBlockRequest req;
  req.mutable_block()->set_mount("/ds/team");
  req.mutable_block()->set_path("t.txt");
  req.mutable_block()->set_version(absl::StrCat(
      absl::ToUnixNanos(absl::TimeFromTimespec(st.st_mtim)), "-", st.st_size));
  req.mutable_block()->set_object_size(st.st_size);
  req.mutable_block()->set_block_size(4 << 20);
  grpc::ClientContext ctx;
  auto reader = stub->ReadBlock(&ctx, req);
  v1::ReadBlockResponse resp;
  std::string got;
  while (reader->Read(&resp)) got += resp.data();
  grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(got, "");
  v1::CacheBlocksRequest cache;
  *cache.add_blocks() = req.block();
  v1::CacheBlocksResponse cached;
  grpc::ClientContext ctx2;
  EXPECT_EQ(stub->CacheBlocks(&ctx2, cache, &cached).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // Nor does the master's invalidation log name the team's paths to it.
  auto master_stub =
      v1::Master::NewStub((*channels)->Channel((*master)->address()));
  v1::Ring ring;
  {
    grpc::ClientContext c;
    ASSERT_TRUE(master_stub->GetRing(&c, v1::GetRingRequest(), &ring).ok());
  }
  for (const char* p : {"/ds/team/t.txt", "/ds/public/a.txt", "/ds/team"}) {
    r = testing::Sh(
        absl::StrCat(as_admin, Larder(absl::StrCat("invalidate ", p, at))));
    ASSERT_EQ(r.code, 0) << p << ": " << r.out;
  }
  v1::GetInvalidationsRequest since;
  since.set_epoch(ring.metadata_epoch());
  since.set_after_seq(ring.invalidation_seq());
  v1::GetInvalidationsResponse told;
  grpc::ClientContext ctx3;
  ASSERT_TRUE(master_stub->GetInvalidations(&ctx3, since, &told).ok());
  EXPECT_THAT(told.paths(), ::testing::ElementsAre("/ds/public/a.txt"));
}

// Every port is loopback unless a flag names another address; beyond
// loopback a daemon that authenticates no one refuses to start unless told
// --allow_insecure_network.
TEST(SecurityDaemonTest, LoopbackByDefaultAndNoUnauthenticatedNetworkPorts) {
  testing::Shell help = testing::Sh(Larder("--helpfull"));
  for (const char* flag : {"master_listen", "master_metrics_listen", "listen",
                           "metrics_listen", "fuse_metrics_listen"}) {
    const std::string shown = absl::StrCat("  --", flag, "=");
    const size_t at = help.out.find(shown);
    ASSERT_NE(at, std::string::npos) << flag;
    EXPECT_EQ(help.out.substr(at + shown.size(), 10), "127.0.0.1:") << flag;
  }
  testing::TempDir dir;
  const std::string state = absl::StrCat(" --state_dir=", dir.path());
  testing::Shell r = testing::Sh(Larder(absl::StrCat(
      "master --master_listen=0.0.0.0:0 --master_metrics_listen=", state)));
  EXPECT_EQ(r.code, 6) << r.out;
  EXPECT_THAT(r.out, HasSubstr("refusing to serve the master on "
                               "0.0.0.0:0 (beyond loopback) without "
                               "authentication"));
  EXPECT_THAT(r.out, HasSubstr("--allow_insecure_network"));
  r = testing::Sh(Larder("worker --listen=0.0.0.0:0 --metrics_listen="));
  EXPECT_EQ(r.code, 6) << r.out;
  // Told so, it starts, with a warning (killed by timeout: exit 124).
  r = testing::Sh(absl::StrCat(
      "timeout 3 ",
      Larder(absl::StrCat("master --master_listen=0.0.0.0:0 "
                          "--master_metrics_listen= --allow_insecure_network",
                          state))));
  EXPECT_EQ(r.code, 124) << r.out;
  EXPECT_THAT(r.out, HasSubstr("security.insecure_network"));
}

}  // namespace
}  // namespace larder
