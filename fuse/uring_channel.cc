// Copyright 2026 The Larder Authors.
#include "fuse/uring_channel.h"

#include <liburing.h>
#include <linux/fuse.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"

namespace larder {
namespace {

// The kernel's FUSE-over-io_uring interface (<linux/fuse.h> 7.42), which
// the 6.1 headers the adaptor builds with lack.
struct RingEntInOut {
  uint64_t flags;
  uint64_t commit_id;   // Of the request in the entry; echoed at commit.
  uint32_t payload_sz;  // Bytes of the payload buffer used.
  uint32_t padding;
  uint64_t reserved;
};
// The entry's header buffer: fuse_in_header (request) or fuse_out_header
// (reply), the request's fixed argument, and the entry's in/out fields.
struct RingReqHeader {
  char in_out[128];
  char op_in[128];
  RingEntInOut ring_ent_in_out;
};
// The command area of an IORING_OP_URING_CMD SQE (SQE128).
struct RingCmdReq {
  uint64_t flags;
  uint64_t commit_id;
  uint16_t qid;
  uint8_t padding[6];
};
constexpr uint32_t kCmdRegister = 1;
constexpr uint32_t kCmdCommitAndFetch = 2;
static_assert(sizeof(RingCmdReq) <= 80, "the SQE128 command area is 80 bytes");

// Room before an entry's payload for the request's header and fixed
// argument, so that header, argument and payload lie end to end as libfuse
// wants them, with no copy of the payload.
constexpr size_t kPrefix = 4096;

void* MapAnonymous(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

struct UringChannel::Entry {
  struct Queue* queue = nullptr;
  RingReqHeader* header = nullptr;  // A page of its own.
  char* region = nullptr;           // kPrefix + payload bytes.
  size_t payload_bytes = 0;
  uint64_t commit_id = 0;
  iovec iov[2];  // Header and payload, as registered.
  char* payload() const { return region + kPrefix; }
};

struct UringChannel::Queue {
  uint16_t qid = 0;
  io_uring ring{};
  bool ring_ready = false;
  std::vector<std::unique_ptr<Entry>> entries;
  std::vector<std::thread> threads;
  // The submission side is shared by the threads that commit replies;
  // the completion side is taken in turns (one thread waits on it).
  absl::Mutex sq_mu;
  absl::Mutex cq_mu;
  std::atomic<bool> stopping{false};

  // Queues `cmd` for `e` and submits it. Errors: the negated errno.
  int Submit(Entry& e, uint32_t cmd) ABSL_LOCKS_EXCLUDED(sq_mu) {
    absl::MutexLock lock(&sq_mu);
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (sqe == nullptr) return -EBUSY;  // More SQEs than entries: a bug.
    std::memset(sqe, 0, 128);
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->flags = IOSQE_FIXED_FILE;
    sqe->fd = 0;  // The registered /dev/fuse.
    sqe->cmd_op = cmd;
    io_uring_sqe_set_data(sqe, &e);
    if (cmd == kCmdRegister) {
      sqe->addr = reinterpret_cast<uint64_t>(e.iov);
      sqe->len = 2;
    }
    auto* req = reinterpret_cast<RingCmdReq*>(sqe->cmd);
    req->qid = qid;
    req->commit_id = cmd == kCmdCommitAndFetch ? e.commit_id : 0;
    const int rc = io_uring_submit(&ring);
    return rc < 0 ? rc : 0;
  }

  // Wakes a thread waiting on the ring (a NOP with no entry).
  void Wake() ABSL_LOCKS_EXCLUDED(sq_mu) {
    absl::MutexLock lock(&sq_mu);
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (sqe == nullptr) return;
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data(sqe, nullptr);
    io_uring_submit(&ring);
  }
};

struct UringChannel::Pending {
  absl::Mutex mu;
  absl::flat_hash_map<uint64_t, Entry*> by_unique ABSL_GUARDED_BY(mu);
};

UringChannel::UringChannel(fuse_session* session)
    : session_(session), pending_(std::make_unique<Pending>()) {}

bool UringChannel::KernelAllows() {
  std::ifstream in("/sys/module/fuse/parameters/enable_uring");
  char c = 0;
  return static_cast<bool>(in >> c) && (c == 'Y' || c == 'y' || c == '1');
}

absl::StatusOr<std::unique_ptr<UringChannel>> UringChannel::Start(
    fuse_session* session, int fd, Options options) {
  std::unique_ptr<UringChannel> ch(new UringChannel(session));
  // The kernel keeps a queue per possible CPU and waits for an entry on
  // each before it sends anything through the rings.
  const int n = std::max(1, get_nprocs_conf());
  const int per_queue = std::max(2, options.threads / n);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t payload = (options.payload_bytes + page - 1) / page * page;
  for (int qid = 0; qid < n; ++qid) {
    auto q = std::make_unique<Queue>();
    q->qid = static_cast<uint16_t>(qid);
    io_uring_params params{};
    params.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE;
    // An SQE per entry, and room for the NOPs that wake the threads.
    params.cq_entries = static_cast<unsigned>(4 * per_queue);
    int rc = io_uring_queue_init_params(static_cast<unsigned>(2 * per_queue),
                                        &q->ring, &params);
    if (rc < 0) {
      return absl::UnavailableError(
          absl::StrCat("io_uring for FUSE queue ", qid, ": ", strerror(-rc)));
    }
    q->ring_ready = true;
    rc = io_uring_register_files(&q->ring, &fd, 1);
    if (rc < 0) {
      ch->queues_.push_back(std::move(q));
      return absl::UnavailableError(
          absl::StrCat("registering /dev/fuse with io_uring: ", strerror(-rc)));
    }
    for (int i = 0; i < per_queue; ++i) {
      auto e = std::make_unique<Entry>();
      e->queue = q.get();
      e->header = static_cast<RingReqHeader*>(MapAnonymous(page));
      e->region = static_cast<char*>(MapAnonymous(kPrefix + payload));
      e->payload_bytes = payload;
      if (e->header == nullptr || e->region == nullptr) {
        if (e->header) ::munmap(e->header, page);
        if (e->region) ::munmap(e->region, kPrefix + payload);
        ch->queues_.push_back(std::move(q));
        return absl::ResourceExhaustedError("no memory for FUSE ring entries");
      }
      e->iov[0] = {e->header, sizeof(RingReqHeader)};
      e->iov[1] = {e->payload(), payload};
      q->entries.push_back(std::move(e));
    }
    ch->queues_.push_back(std::move(q));
  }
  // Registered last, all at once: the kernel starts using the rings when
  // every queue has an entry.
  for (auto& q : ch->queues_) {
    for (auto& e : q->entries) {
      if (int rc = q->Submit(*e, kCmdRegister); rc < 0) {
        return absl::UnavailableError(
            absl::StrCat("registering a FUSE ring entry: ", strerror(-rc)));
      }
    }
  }
  LARDER_LOG(INFO, "fuse.channel")
      .Field("channel", "io_uring")
      .Field("queues", n)
      .Field("threads_per_queue", per_queue)
      .Field("payload_bytes", payload);
  return ch;
}

UringChannel::~UringChannel() {
  LARDER_LOG(INFO, "fuse.channel_stopped")
      .Field("channel", "io_uring")
      .Field("requests", requests_.load());
  for (auto& q : queues_) q->stopping = true;
  for (auto& q : queues_) {
    if (!q->ring_ready) continue;
    for (size_t i = 0; i < q->threads.size(); ++i) q->Wake();
  }
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  for (auto& q : queues_) {
    for (std::thread& t : q->threads) t.join();
    if (q->ring_ready) io_uring_queue_exit(&q->ring);
    for (auto& e : q->entries) {
      ::munmap(e->header, page);
      ::munmap(e->region, kPrefix + e->payload_bytes);
    }
  }
}

void UringChannel::Run() {
  for (auto& q : queues_) {
    if (!q->threads.empty()) continue;  // Running already.
    for (size_t i = 0; i < q->entries.size(); ++i) {
      q->threads.emplace_back([this, q = q.get()] { Serve(*q); });
    }
  }
}

int UringChannel::queues() const { return static_cast<int>(queues_.size()); }

void UringChannel::Serve(Queue& q) {
  for (;;) {
    Entry* e = nullptr;
    int res = 0;
    {
      absl::MutexLock lock(&q.cq_mu);
      if (q.stopping) return;
      io_uring_cqe* cqe = nullptr;
      const int rc = io_uring_wait_cqe(&q.ring, &cqe);
      if (rc == -EINTR) continue;
      if (rc < 0) {
        LARDER_LOG(ERROR, "fuse.uring_wait")
            .Field("queue", q.qid)
            .Field("error", strerror(-rc));
        return;
      }
      e = static_cast<Entry*>(io_uring_cqe_get_data(cqe));
      res = cqe->res;
      io_uring_cqe_seen(&q.ring, cqe);
    }
    if (e == nullptr) continue;  // A wake-up: look at `stopping` again.
    if (res < 0) {
      // The connection ended (unmount: ENOTCONN) or the kernel dropped the
      // request the entry held; the entry is no longer the kernel's.
      if (res != -ENOTCONN && res != -ECANCELED && !q.stopping) {
        LARDER_LOG(WARNING, "fuse.uring_entry")
            .Field("queue", q.qid)
            .Field("error", strerror(-res));
      }
      continue;
    }
    Handle(*e);
  }
}

void UringChannel::Handle(Entry& e) {
  const auto* in = reinterpret_cast<const fuse_in_header*>(e.header->in_out);
  const RingEntInOut& io = e.header->ring_ent_in_out;
  e.commit_id = io.commit_id;
  const uint64_t payload = io.payload_sz;
  // The fixed argument is what the header's length leaves beside the
  // payload; both are checked against the buffers before a byte is moved.
  if (payload > e.payload_bytes || in->len < sizeof(fuse_in_header) + payload ||
      in->len - sizeof(fuse_in_header) - payload > sizeof(e.header->op_in)) {
    LARDER_LOG(ERROR, "fuse.uring_request")
        .Field("len", in->len)
        .Field("payload", payload)
        .Field("error", "malformed: answered EIO");
    fuse_out_header out{sizeof(fuse_out_header), -EIO, in->unique};
    std::memcpy(e.header->in_out, &out, sizeof(out));
    e.header->ring_ent_in_out.payload_sz = 0;
    e.queue->Submit(e, kCmdCommitAndFetch);
    return;
  }
  requests_.fetch_add(1, std::memory_order_relaxed);
  const size_t op = in->len - sizeof(fuse_in_header) - payload;
  char* start = e.payload() - op - sizeof(fuse_in_header);
  std::memcpy(start, in, sizeof(fuse_in_header));
  std::memcpy(start + sizeof(fuse_in_header), e.header->op_in, op);
  {
    absl::MutexLock lock(&pending_->mu);
    pending_->by_unique[in->unique] = &e;
  }
  const uint64_t unique = in->unique;
  const uint32_t opcode = in->opcode;
  fuse_buf buf{};
  buf.size = in->len;
  buf.mem = start;
  fuse_session_process_buf(session_, &buf);
  // Forgets have no reply; the kernel sends them through /dev/fuse, but
  // one that came through a ring must still give its entry back.
  if (opcode == FUSE_FORGET || opcode == FUSE_BATCH_FORGET) {
    {
      absl::MutexLock lock(&pending_->mu);
      if (pending_->by_unique.erase(unique) == 0) return;
    }
    fuse_out_header out{sizeof(fuse_out_header), 0, unique};
    std::memcpy(e.header->in_out, &out, sizeof(out));
    e.header->ring_ent_in_out.payload_sz = 0;
    e.queue->Submit(e, kCmdCommitAndFetch);
  }
}

bool UringChannel::Reply(const iovec* iov, int count) {
  if (count < 1 || iov[0].iov_len < sizeof(fuse_out_header)) return false;
  const auto* out = static_cast<const fuse_out_header*>(iov[0].iov_base);
  if (out->unique == 0) return false;  // A notification.
  Entry* e = nullptr;
  {
    absl::MutexLock lock(&pending_->mu);
    auto it = pending_->by_unique.find(out->unique);
    if (it == pending_->by_unique.end()) return false;
    e = it->second;
    pending_->by_unique.erase(it);
  }
  size_t len = 0;
  for (int i = 1; i < count; ++i) {
    const size_t n = iov[i].iov_len;
    if (len + n > e->payload_bytes) {  // Larger than any reply can be.
      LARDER_LOG(ERROR, "fuse.uring_reply")
          .Field("unique", out->unique)
          .Field("bytes", len + n)
          .Field("error", "larger than the entry: answered EIO");
      fuse_out_header eio{sizeof(fuse_out_header), -EIO, out->unique};
      std::memcpy(e->header->in_out, &eio, sizeof(eio));
      e->header->ring_ent_in_out.payload_sz = 0;
      e->queue->Submit(*e, kCmdCommitAndFetch);
      return true;
    }
    std::memcpy(e->payload() + len, iov[i].iov_base, n);
    len += n;
  }
  std::memcpy(e->header->in_out, out, sizeof(fuse_out_header));
  e->header->ring_ent_in_out.payload_sz = static_cast<uint32_t>(len);
  if (int rc = e->queue->Submit(*e, kCmdCommitAndFetch); rc < 0) {
    LARDER_LOG(ERROR, "fuse.uring_commit")
        .Field("unique", out->unique)
        .Field("error", strerror(-rc));
  }
  return true;
}

}  // namespace larder
