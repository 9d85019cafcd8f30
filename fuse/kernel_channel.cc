// Copyright 2026 The Larder Authors.
#include "fuse/kernel_channel.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/log.h"
#include "fuse/passthrough.h"
#include "fuse/uring_channel.h"

namespace larder {
namespace {

// The backing id of the open reply this thread is sending (0: none).
thread_local int tls_open_backing = 0;

}  // namespace

KernelChannel::OpenBacking::OpenBacking(int id) { tls_open_backing = id; }
KernelChannel::OpenBacking::~OpenBacking() { tls_open_backing = 0; }

std::optional<uint64_t> KernelChannel::InitRequestFlags(const void* buf,
                                                        size_t n,
                                                        uint64_t& unique) {
  if (n < sizeof(fuse_in_header) + sizeof(fuse_init_in) -
              sizeof(fuse_init_in::unused))
    return std::nullopt;
  const auto* in = static_cast<const fuse_in_header*>(buf);
  if (in->opcode != FUSE_INIT) return std::nullopt;
  const auto* init = reinterpret_cast<const fuse_init_in*>(in + 1);
  uint64_t flags = init->flags;
  if (flags & FUSE_INIT_EXT) flags |= uint64_t{init->flags2} << 32;
  unique = in->unique;
  return flags;
}

KernelChannel::InitResult KernelChannel::AmendInitReply(
    fuse_init_out& reply, size_t reply_len, uint64_t offered, uint32_t max_read,
    bool passthrough, bool uring) {
  InitResult result;
  // Lookups and readdirs of one directory in parallel: the daemon answers
  // each on its own thread, and a cold lookup may wait tens of ms on the
  // store.
  if (offered & FUSE_PARALLEL_DIROPS) reply.flags |= FUSE_PARALLEL_DIROPS;
  if (uring && (offered & kInitOverIoUring) && (offered & FUSE_INIT_EXT)) {
    reply.flags |= FUSE_INIT_EXT;
    reply.flags2 |= static_cast<uint32_t>(kInitOverIoUring >> 32);
    result.uring = true;
  }
  if (offered & FUSE_MAX_PAGES) {
    const uint32_t pages = static_cast<uint32_t>(
        std::min<uint64_t>((uint64_t{max_read} + 4095) / 4096, 65535));
    reply.flags |= FUSE_MAX_PAGES;
    reply.max_pages =
        static_cast<uint16_t>(std::max<uint32_t>(pages, reply.max_pages));
  }
  if ((offered & kDirectIoAllowMmap) && (offered & FUSE_INIT_EXT)) {
    reply.flags |= FUSE_INIT_EXT;
    reply.flags2 |= static_cast<uint32_t>(kDirectIoAllowMmap >> 32);
    result.direct_io_mmap = true;
  }
  // Passthrough needs max_stack_depth (7.40, the first unused word): the
  // backing memfds sit on no stacked file system, so 1.
  if (passthrough && (offered & kInitPassthrough) &&
      (offered & FUSE_INIT_EXT) && !(reply.flags & FUSE_WRITEBACK_CACHE) &&
      reply_len > offsetof(fuse_init_out, unused)) {
    reply.flags |= FUSE_INIT_EXT;
    reply.flags2 |= static_cast<uint32_t>(kInitPassthrough >> 32);
    reply.unused[0] = 1;
    result.passthrough = true;
  }
  return result;
}

void KernelChannel::AmendOpenReply(fuse_open_out& reply, int id) {
  // The backing id takes the place of 7.38's padding.
  reply.open_flags |= kOpenPassthrough;
  reply.padding = static_cast<uint32_t>(id);
}

ssize_t KernelChannel::Read(int fd, void* buf, size_t len) {
  const ssize_t n = ::read(fd, buf, len);
  uint64_t unique = 0;
  if (n > 0) {
    if (std::optional<uint64_t> flags =
            InitRequestFlags(buf, static_cast<size_t>(n), unique)) {
      kernel_init_flags_ = *flags;
      init_unique_ = unique;
    }
  }
  return n;
}

ssize_t KernelChannel::Writev(int fd, struct iovec* iov, int count) {
  const auto* out = static_cast<const fuse_out_header*>(iov[0].iov_base);
  if (tls_open_backing != 0 && out->error == 0 && count == 2 &&
      iov[1].iov_len == sizeof(fuse_open_out)) {
    fuse_open_out reply;
    std::memcpy(&reply, iov[1].iov_base, sizeof(reply));
    AmendOpenReply(reply, tls_open_backing);
    tls_open_backing = 0;
    iovec amended[2] = {iov[0], {&reply, sizeof(reply)}};
    return Send(fd, amended, 2);
  }
  const uint64_t init = init_unique_.load(std::memory_order_relaxed);
  if (init == 0 || out->unique != init || out->error != 0 || count != 2 ||
      iov[1].iov_len < offsetof(fuse_init_out, unused))
    return Send(fd, iov, count);
  // The INIT reply: amend a copy of libfuse's.
  init_unique_ = 0;
  fuse_init_out reply{};
  std::memcpy(&reply, iov[1].iov_base, std::min(iov[1].iov_len, sizeof(reply)));
  const InitResult result =
      AmendInitReply(reply, iov[1].iov_len, kernel_init_flags_,
                     options_.max_read, options_.passthrough, options_.uring);
  if (result.direct_io_mmap) direct_io_mmap_ = true;
  if (result.passthrough) backing_.Enable();
  LARDER_LOG(INFO, "fuse.init_reply")
      .Field("max_pages", reply.max_pages)
      .Field("direct_io_mmap", direct_io_mmap_.load())
      .Field("passthrough", backing_.enabled())
      .Field("io_uring", result.uring)
      .Field("parallel_dirops", (reply.flags & FUSE_PARALLEL_DIROPS) != 0)
      .Field("offered", absl::StrCat(absl::Hex(kernel_init_flags_.load())))
      .Field("flags", absl::StrCat(absl::Hex(reply.flags)));
  iovec amended[2] = {iov[0], {&reply, iov[1].iov_len}};
  const ssize_t sent = ::writev(fd, amended, 2);
  if (options_.uring && !result.uring) {
    LARDER_LOG(INFO, "fuse.channel")
        .Field("channel", "/dev/fuse")
        .Field("why", UringChannel::KernelAllows()
                          ? "the kernel did not offer io_uring at INIT"
                          : "the kernel does not allow io_uring "
                            "(/sys/module/fuse/parameters/enable_uring is not "
                            "Y)");
  }
  if (result.uring && sent > 0 && options_.start_uring) options_.start_uring();
  return sent;
}

bool KernelChannel::WillUseUring() const {
  const uint64_t offered = kernel_init_flags_.load();
  return options_.uring && (offered & kInitOverIoUring) &&
         (offered & FUSE_INIT_EXT);
}

ssize_t KernelChannel::Send(int fd, struct iovec* iov, int count) {
  if (UringChannel* uring = uring_.load(std::memory_order_acquire);
      uring != nullptr && uring->Reply(iov, count)) {
    ssize_t n = 0;
    for (int i = 0; i < count; ++i) n += static_cast<ssize_t>(iov[i].iov_len);
    return n;
  }
  return ::writev(fd, iov, count);
}

ssize_t KernelChannel::Splice(int fdin, off_t* offin, int fdout, off_t* offout,
                              size_t len, unsigned flags) {
  return ::splice(fdin, offin, fdout, offout, len, flags);
}

void RaisePipeMaxSize(uint64_t max_read) {
  // The kernel rounds a pipe's size up to a power of two pages.
  uint64_t need = 4096;
  while (need < max_read + 4096) need *= 2;
  uint64_t have = 0;
  std::ifstream("/proc/sys/fs/pipe-max-size") >> have;
  if (have >= need) return;
  std::ofstream out("/proc/sys/fs/pipe-max-size");
  out << need;
  out.flush();
  if (!out) {
    LARDER_LOG(WARNING, "fuse.no_splice")
        .Field("pipe_max_size", have)
        .Field("hint",
               absl::StrCat("reads are copied through the daemon; allow "
                            "zero-copy splice with `sysctl fs.pipe-max-size=",
                            need, "` (or a smaller --max_read)"));
  }
}

void RaiseMaxPagesLimit(uint64_t max_read) {
  const uint64_t pages = (max_read + 4095) / 4096;
  if (pages <= 256) return;
  const char* file = "/proc/sys/fs/fuse/max_pages_limit";
  uint64_t have = 0;
  if (!(std::ifstream(file) >> have)) {
    LARDER_LOG(INFO, "fuse.max_pages_fixed")
        .Field("max_read", max_read)
        .Field("reason", "this kernel caps requests at 1 MiB");
    return;
  }
  if (have >= pages) return;
  std::ofstream out(file);
  out << pages;
  out.flush();
  if (!out) {
    LARDER_LOG(WARNING, "fuse.max_pages_limited")
        .Field("max_pages_limit", have)
        .Field("hint", absl::StrCat("requests stay at ", have * 4,
                                    " KiB; allow larger ones with `sysctl "
                                    "fs.fuse.max_pages_limit=",
                                    pages, "`"));
  }
}

void TuneReadahead(const std::string& mountpoint, uint64_t read_ahead) {
  if (read_ahead == 0) return;
  std::optional<MountInfo> m = FindMount(mountpoint);
  if (!m) return;
  const std::string file =
      absl::StrCat("/sys/class/bdi/", m->device, "/read_ahead_kb");
  std::ofstream out(file);
  out << read_ahead / 1024;
  out.flush();
  if (!out) {
    LARDER_LOG(INFO, "fuse.readahead_untuned")
        .Field("file", file)
        .Field("reason", "not writable (not root?)");
  }
}

}  // namespace larder
