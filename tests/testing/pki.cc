// Copyright 2026 The Larder Authors.
#include "tests/testing/pki.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace larder::testing {
namespace {

// Random token: 32 hex characters from /dev/urandom.
std::string RandomToken(absl::string_view prefix) {
  unsigned char b[16] = {};
  if (FILE* f = std::fopen("/dev/urandom", "rb")) {
    if (std::fread(b, 1, sizeof(b), f) != sizeof(b)) std::abort();
    std::fclose(f);
  }
  std::string out(prefix);
  static const char kHex[] = "0123456789abcdef";
  for (unsigned char c : b) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Pki>> Pki::Create() {
  std::unique_ptr<Pki> p(new Pki);
  p->admin_token_ = RandomToken("adm-");
  p->reader_token_ = RandomToken("rdr-");
  p->writer_token_ = RandomToken("wrt-");
  // P-256 keys: made in milliseconds, unlike RSA.
  const std::string script = absl::StrCat(R"(set -e
cd ')",
                                          p->dir(), R"('
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 3 -subj "/CN=$2" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}
leaf() {  # name CA CN SAN-or-empty
  key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$3"
  { echo "basicConstraints=CA:FALSE"; echo "extendedKeyUsage=serverAuth,clientAuth"
    if [ -n "$4" ]; then echo "subjectAltName=$4"; fi; } > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial \
    -out "$1.pem" -days 3 -extfile "$1.ext" 2>/dev/null
}
ca ca larder-test-ca
ca otherca some-other-ca
leaf node ca larder-node "DNS:larder-node,DNS:localhost,IP:127.0.0.1"
leaf admin ca larder-admin ""
leaf reader ca alice ""
leaf rogue otherca larder-admin "DNS:larder-node,DNS:localhost,IP:127.0.0.1"
chmod 600 *.key
)");
  Shell sh = Sh(script);
  if (sh.code != 0)
    return absl::InternalError(absl::StrCat("openssl failed:\n", sh.out));
  absl::Status st =
      WriteFile(p->tokens_file(),
                absl::StrCat("# test cluster tokens\nadmin ", p->admin_token_,
                             "\nreader ", p->reader_token_, "\nwriter:/ckpt ",
                             p->writer_token_, "\n"));
  if (st.ok()) st = WriteFile(p->admin_token_file(), p->admin_token_ + "\n");
  if (st.ok()) st = WriteFile(p->reader_token_file(), p->reader_token_ + "\n");
  if (st.ok()) st = WriteFile(p->writer_token_file(), p->writer_token_ + "\n");
  if (!st.ok()) return st;
  // As an operator would leave them: the CA and certificates readable by
  // all, keys and tokens by root only.
  ::chmod(p->dir().c_str(), 0755);
  for (const std::string& f : {p->tokens_file(), p->admin_token_file(),
                               p->reader_token_file(), p->writer_token_file()})
    ::chmod(f.c_str(), 0600);
  for (const char* pem : {"ca", "otherca", "node", "admin", "reader", "rogue"})
    ::chmod(absl::StrCat(p->dir(), "/", pem, ".pem").c_str(), 0644);
  return p;
}

std::vector<std::string> Pki::NodeFlags() const {
  return {absl::StrCat("--tls_cert_file=", node().cert),
          absl::StrCat("--tls_key_file=", node().key),
          absl::StrCat("--tls_ca_file=", ca()),
          "--tls_admin_identities=larder-node,larder-admin",
          absl::StrCat("--auth_tokens_file=", tokens_file())};
}

SecurityOptions Pki::Client(Role role) const {
  SecurityOptions o;
  o.tls_ca_file = ca();
  if (role == Role::kAdmin) o.token_file = admin_token_file();
  if (role == Role::kReader) o.token_file = reader_token_file();
  if (role == Role::kWriter) o.token_file = writer_token_file();
  return o;
}

const Pki* SuitePki() {
  static const Pki* pki = []() -> const Pki* {
    const char* env = std::getenv("LARDER_TEST_SECURE");
    if (env == nullptr || *env == '\0' || std::string(env) == "0")
      return nullptr;
    absl::StatusOr<std::unique_ptr<Pki>> p = Pki::Create();
    if (!p.ok()) {
      std::fprintf(stderr, "LARDER_TEST_SECURE: %s\n",
                   p.status().ToString().c_str());
      std::abort();
    }
    return p->release();  // Lives as long as the test binary.
  }();
  return pki;
}

SecurityOptions SuiteSecurity(Role role) {
  const Pki* p = SuitePki();
  return p == nullptr ? SecurityOptions() : p->Client(role);
}

std::shared_ptr<const ChannelFactory> SuiteChannels(Role role) {
  absl::StatusOr<std::shared_ptr<const ChannelFactory>> f =
      ChannelFactory::Create(SuiteSecurity(role));
  if (!f.ok()) {
    std::fprintf(stderr, "SuiteChannels: %s\n", f.status().ToString().c_str());
    std::abort();
  }
  return *f;
}

}  // namespace larder::testing
