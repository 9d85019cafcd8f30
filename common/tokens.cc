// Copyright 2026 The Larder Authors.
//
// Bearer tokens: the client's (--token_file, $LARDER_TOKEN), the server's
// tokens file with roles, and the local admin token each daemon keeps for
// its own user.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/auth_context.h>
#include <grpcpp/support/client_interceptor.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/log.h"
#include "common/security.h"
#include "common/security_internal.h"
#include "common/status_macros.h"

namespace larder {
namespace {

constexpr size_t kMinTokenLength = 16;

// A token travels in an HTTP/2 header: printable ASCII, no spaces.
absl::Status ValidateToken(absl::string_view token, absl::string_view where) {
  if (token.size() < kMinTokenLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("the token ", where, " is shorter than ", kMinTokenLength,
                     " characters"));
  }
  for (char c : token) {
    if (c <= 0x20 || c >= 0x7f) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the token ", where, " has a character other than printable ASCII"));
    }
  }
  return absl::OkStatus();
}

absl::Status ErrnoStatus(int err, absl::string_view what,
                         absl::string_view path) {
  return absl::ErrnoToStatus(err, absl::StrCat(what, " ", path));
}

// A mount path of a token's scope: absolute, normalized ("/a/b").
absl::Status ValidateScopePath(absl::string_view path,
                               absl::string_view where) {
  bool ok = absl::StartsWith(path, "/") && path.size() <= 4096 &&
            (path == "/" || !absl::EndsWith(path, "/"));
  if (ok && path != "/") {
    for (absl::string_view part : absl::StrSplit(path.substr(1), '/')) {
      if (part.empty() || part == "." || part == "..") ok = false;
    }
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": '", path,
        "' is not a mount path (want /a/b, several separated by ',')"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> LoadClientToken(const std::string& token_file) {
  std::string file = token_file;
  std::string token;
  if (file.empty()) {
    const char* env = std::getenv("LARDER_TOKEN");
    if (env != nullptr && *env != '\0') {
      token = env;
      LARDER_RETURN_IF_ERROR(ValidateToken(token, "in $LARDER_TOKEN"));
      RegisterSecret(token);
      return token;
    }
    const char* env_file = std::getenv("LARDER_TOKEN_FILE");
    if (env_file == nullptr || *env_file == '\0') return std::string();
    file = env_file;
  }
  LARDER_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(file, "token file"));
  RegisterSecret(text);
  token = std::string(absl::StripAsciiWhitespace(absl::string_view(text).substr(
      0, std::min(text.size(), text.find('\n')))));
  if (token.empty())
    return absl::InvalidArgumentError(
        absl::StrCat("token file ", file, " is empty"));
  RegisterSecret(token);
  LARDER_RETURN_IF_ERROR(ValidateToken(token, absl::StrCat("in ", file)));
  return token;
}

absl::StatusOr<std::vector<TokenEntry>> LoadTokensFile(
    const std::string& path) {
  LARDER_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, "tokens file"));
  std::vector<TokenEntry> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> f =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const std::string where = absl::StrCat(path, ":", line_no);
    if (f.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          where,
          ": expected '<admin|writer[:/mount,...]|reader[:/mount,...]> "
          "<token>' (",
          f.size(), " fields)"));
    }
    RegisterSecret(f[1]);
    TokenEntry e;
    absl::string_view role = f[0];
    absl::string_view scope;
    if (const size_t colon = role.find(':'); colon != role.npos) {
      scope = role.substr(colon + 1);
      role = role.substr(0, colon);
    }
    if (role == "admin") {
      e.role = Role::kAdmin;
    } else if (role == "writer") {
      e.role = Role::kWriter;
    } else if (role == "reader") {
      e.role = Role::kReader;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unknown role (want admin, writer or reader)"));
    }
    if (f[0].find(':') != absl::string_view::npos) {
      if (e.role == Role::kAdmin) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": an admin token cannot be limited to mounts"));
      }
      for (absl::string_view m : absl::StrSplit(scope, ',')) {
        LARDER_RETURN_IF_ERROR(ValidateScopePath(m, where));
        e.mounts.emplace_back(m);
      }
    }
    LARDER_RETURN_IF_ERROR(ValidateToken(f[1], absl::StrCat("at ", where)));
    e.token = std::string(f[1]);
    out.push_back(std::move(e));
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokens file ", path, " lists no token"));
  }
  return out;
}

std::string DefaultAdminTokenPath() {
  if (::geteuid() == 0) return "/var/lib/larder/admin.token";
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state != nullptr && state[0] == '/')
    return absl::StrCat(state, "/larder/admin.token");
  const char* home = std::getenv("HOME");
  return absl::StrCat(home != nullptr && home[0] == '/' ? home : "/tmp",
                      "/.local/state/larder/admin.token");
}

absl::StatusOr<std::string> ReadAdminToken(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open admin token", path);
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return ErrnoStatus(errno, "cannot stat admin token", path);
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "admin token %s must be a regular file of uid %d with mode 0600 (it "
        "is uid %d mode %04o): remove it and restart the daemon to make a "
        "new one",
        path, ::geteuid(), st.st_uid, st.st_mode & 07777));
  }
  char buf[256];
  const ssize_t n = ::read(fd, buf, sizeof(buf));
  if (n < 0) return ErrnoStatus(errno, "cannot read admin token", path);
  std::string token(absl::StripAsciiWhitespace(
      absl::string_view(buf, static_cast<size_t>(n))));
  RegisterSecret(token);
  LARDER_RETURN_IF_ERROR(ValidateToken(token, absl::StrCat("in ", path)));
  return token;
}

namespace {

// mkdir -p with mode 0700 for the directories it makes.
absl::Status MakePrivateDirs(const std::string& dir) {
  std::string at;
  for (absl::string_view part : absl::StrSplit(dir, '/', absl::SkipEmpty())) {
    absl::StrAppend(&at, "/", part);
    if (::mkdir(at.c_str(), 0700) != 0 && errno != EEXIST)
      return ErrnoStatus(errno, "cannot make directory", at);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> EnsureAdminToken(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (path.empty() || path[0] != '/' || slash == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "admin token path '", path, "' is not an absolute file path"));
  }
  absl::StatusOr<std::string> token = ReadAdminToken(path);
  if (token.ok() || !absl::IsNotFound(token.status())) return token;
  LARDER_RETURN_IF_ERROR(MakePrivateDirs(path.substr(0, slash)));
  unsigned char raw[32];
  if (::getrandom(raw, sizeof(raw), 0) != static_cast<ssize_t>(sizeof(raw)))
    return absl::InternalError("getrandom failed");
  const std::string made = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(raw), sizeof(raw)));
  RegisterSecret(made);
  // Written whole under a temporary name, then linked into place: another
  // daemon starting at the same time reads either no file or all of it, and
  // the first link wins.
  const std::string tmp =
      absl::StrCat(path, ".", ::getpid(), ".", absl::GetCurrentTimeNanos());
  const int fd = ::open(
      tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, "cannot create admin token", tmp);
  const std::string line = made + "\n";
  const bool written = ::write(fd, line.data(), line.size()) ==
                           static_cast<ssize_t>(line.size()) &&
                       ::fsync(fd) == 0;
  ::close(fd);
  const int linked = written ? ::link(tmp.c_str(), path.c_str()) : -1;
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (!written) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  if (linked != 0 && link_errno != EEXIST)
    return ErrnoStatus(link_errno, "cannot create admin token", path);
  if (linked == 0) {
    LARDER_LOG(INFO, "security.admin_token_created").Field("path", path);
  }
  return ReadAdminToken(path);
}

}  // namespace larder
