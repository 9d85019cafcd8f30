// Copyright 2026 The Larder Authors.
//
// larder._native: the client library (client/include/larder/client.h) for
// Python. The package around it (python/larder) is the public API; this
// module is its engine and keeps to three rules:
//
//  * The GIL is released around every call that waits (an RPC, a block
//    read) or copies bytes, so loader threads read side by side.
//  * Bytes land in their final buffer once: read() fills a bytes object
//    allocated at its final size, readinto() the caller's buffer.
//  * A process made by fork() never runs the parent's client: its threads
//    did not survive the fork. The Python layer makes a new client in the
//    child; objects inherited from the parent are abandoned (leaked), never
//    destroyed, because destroying them would join threads that do not exist.
//
// Errors are raised as the classes of larder/errors.py, chosen by code.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/thread_pool.h"
#include "grpc/grpc.h"
#include "larder/client.h"
#include "python/support.h"

namespace py = pybind11;

namespace larder {
namespace {

class NativeFile;
class NativeWriter;

// A connection to the cluster that survives fork(). Every call takes a Use,
// which connects on first use and keeps the in-flight count up. Before a
// fork (os.register_at_fork, registered by the module) every client of the
// process is quiesced: new calls wait, calls in flight finish, and the
// connection, its open files and its read pool are destroyed, so that no
// gRPC state crosses the fork (gRPC's shared epoll set would hang the
// child). Both processes then reconnect on their next call; a file opened
// before the fork is opened again, pinned to the same version.
class NativeClient : public std::enable_shared_from_this<NativeClient> {
 public:
  NativeClient(std::string master, const py::dict& options)
      : options_(OptionsFrom(std::move(master), options, &read_threads_)),
        pid_(::getpid()) {
    absl::MutexLock lock(&RegistryMu());
    Registry().insert(this);
  }
  ~NativeClient() {
    {
      absl::MutexLock lock(&RegistryMu());
      Registry().erase(this);
    }
    absl::MutexLock lock(&mu_);
    AbandonIfForked();
  }

  // A connection held for one call.
  class Use {
   public:
    Use(NativeClient* owner, Client* client, uint64_t generation)
        : owner_(owner), client_(client), generation_(generation) {}
    Use(Use&& o) noexcept
        : owner_(std::exchange(o.owner_, nullptr)),
          client_(o.client_),
          generation_(o.generation_) {}
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    ~Use() {
      if (owner_ != nullptr) owner_->Release();
    }
    Client* operator->() const { return client_; }
    Client& client() const { return *client_; }
    uint64_t generation() const { return generation_; }

   private:
    NativeClient* owner_;
    Client* client_;
    uint64_t generation_;
  };

  // Called without the GIL.
  absl::StatusOr<Use> Acquire() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](bool* forking) { return !*forking; }, &forking_));
    AbandonIfForked();
    if (client_ == nullptr) {
      // Warm from the connection dropped at the last fork (in the parent and
      // in the child alike): no master call to connect, and the metadata the
      // parent had looked up.
      ClientOptions o = options_;
      o.warm_start = warm_;
      absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(std::move(o));
      if (!c.ok()) return c.status();
      client_ = std::move(*c);
      ++generation_;
    }
    ++in_flight_;
    return Use(this, client_.get(), generation_);
  }

  // Before a fork (GIL held): see the class comment.
  void Quiesce() ABSL_LOCKS_EXCLUDED(mu_) {
    py::gil_scoped_release nogil;
    absl::MutexLock lock(&mu_);
    forking_ = true;
    mu_.Await(absl::Condition(
        +[](int* n) { return *n == 0; }, &in_flight_));
    AbandonIfForked();
    DropConnectionLocked();
  }
  // After a fork, in the parent and in the child. A fork seen here was
  // quiesced (nothing in flight, no connection), so the child's state is
  // clean: it is not the unseen fork that AbandonIfForked handles, and it
  // keeps warm_ (its next connection starts warm).
  void Resume() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    forking_ = false;
    pid_ = ::getpid();
  }

  void AddFile(NativeFile* f) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    files_.insert(f);
  }
  void RemoveFile(NativeFile* f) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    files_.erase(f);
  }
  void AddWriter(NativeWriter* w) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    writers_.insert(w);
  }
  void RemoveWriter(NativeWriter* w) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    writers_.erase(w);
  }

  // Drops the connection (the next call makes a new one).
  void Close() ABSL_LOCKS_EXCLUDED(mu_) {
    Quiesce();
    Resume();
  }

  // Runs fn(0..n-1) on the read pool; the calling thread takes a share.
  // Called inside a Use (the pool lives as long as the connection).
  void ParallelFor(size_t n, const std::function<void(size_t)>& fn)
      ABSL_LOCKS_EXCLUDED(mu_);

  static void QuiesceAll() {
    for (const std::shared_ptr<NativeClient>& c : Live()) c->Quiesce();
    // The last channel's teardown may finish on one of gRPC's threads.
    py::gil_scoped_release nogil;
    const absl::Time deadline = absl::Now() + absl::Seconds(2);
    while (grpc_is_initialized() && absl::Now() < deadline)
      absl::SleepFor(absl::Milliseconds(1));
  }
  static void ResumeAll() {
    for (const std::shared_ptr<NativeClient>& c : Live()) c->Resume();
  }

  const ClientOptions& options() const { return options_; }

 private:
  static absl::Mutex& RegistryMu() {
    static absl::Mutex* mu = new absl::Mutex;
    return *mu;
  }
  static std::set<NativeClient*>& Registry() {
    static auto* r = new std::set<NativeClient*>;
    return *r;
  }
  static std::vector<std::shared_ptr<NativeClient>> Live() {
    std::vector<std::shared_ptr<NativeClient>> out;
    absl::MutexLock lock(&RegistryMu());
    for (NativeClient* c : Registry())
      if (auto p = c->weak_from_this().lock()) out.push_back(std::move(p));
    return out;
  }

  void Release() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    --in_flight_;
  }

  void DropConnectionLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A fork the hooks did not see (a fork from C code): the parent's objects
  // are leaked, never destroyed (their threads are gone; see file comment).
  void AbandonIfForked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  int read_threads_ = 16;  // Before options_, which sets it.
  const ClientOptions options_;
  absl::Mutex mu_;
  pid_t pid_ ABSL_GUARDED_BY(mu_);
  bool forking_ ABSL_GUARDED_BY(mu_) = false;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<Client> client_ ABSL_GUARDED_BY(mu_);
  // What the last dropped connection knew (Client::WarmState).
  std::shared_ptr<const ClientWarmState> warm_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ThreadPool> pool_ ABSL_GUARDED_BY(mu_);
  std::set<NativeFile*> files_ ABSL_GUARDED_BY(mu_);
  std::set<NativeWriter*> writers_ ABSL_GUARDED_BY(mu_);
};

// A new object being written (Client::Create). Its Writer belongs to one
// connection: a fork drops it (aborted: nothing appears), and its later
// calls raise.
class NativeWriter {
 public:
  NativeWriter(std::shared_ptr<NativeClient> owner,
               std::unique_ptr<Writer> writer, uint64_t generation)
      : owner_(std::move(owner)),
        path_(writer->path()),
        writer_(std::move(writer)),
        generation_(generation) {
    owner_->AddWriter(this);
  }
  ~NativeWriter() {
    owner_->RemoveWriter(this);
    py::gil_scoped_release nogil;
    Drop(/*abandon=*/false);  // Aborts one neither closed nor aborted.
  }

  // Dropped with its connection (the owner holds its lock; no Use is open).
  void Drop(bool abandon) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (abandon) {
      (void)writer_.release();
    } else {
      writer_.reset();
    }
  }

  void Write(py::buffer data) {
    py::buffer_info b = data.request();
    const absl::string_view bytes(static_cast<const char*>(b.ptr),
                                  static_cast<size_t>(b.size * b.itemsize));
    OkOrRaise(Run([&](Writer& w) { return w.Write(bytes); }), path_);
  }
  FileInfo Close() {
    absl::StatusOr<FileInfo> info;
    OkOrRaise(Run([&](Writer& w) {
                info = w.Close();
                return info.status();
              }),
              path_);
    return *info;
  }
  void Abort() {
    OkOrRaise(Run([&](Writer& w) { return w.Abort(); }), path_);
  }
  uint64_t size() {
    absl::MutexLock lock(&mu_);
    return size_;
  }

 private:
  // fn on the writer, without the GIL, inside a Use of its connection.
  absl::Status Run(absl::FunctionRef<absl::Status(Writer&)> fn) {
    py::gil_scoped_release nogil;
    absl::StatusOr<NativeClient::Use> use = owner_->Acquire();
    if (!use.ok()) return use.status();
    absl::MutexLock lock(&mu_);
    if (writer_ == nullptr || use->generation() != generation_) {
      return absl::FailedPreconditionError(absl::StrCat(
          path_,
          ": the writer is closed, or the process forked while it was open "
          "(it was aborted: nothing was written)"));
    }
    absl::Status st = fn(*writer_);
    size_ = writer_->size();
    return st;
  }

  const std::shared_ptr<NativeClient> owner_;
  const std::string path_;
  absl::Mutex mu_;
  std::unique_ptr<Writer> writer_ ABSL_GUARDED_BY(mu_);
  const uint64_t generation_;
  uint64_t size_ ABSL_GUARDED_BY(mu_) = 0;
};

// An open file, pinned to the version it had at open. Its File belongs to
// one connection: after a fork it is opened again (same version, else
// ObjectChangedError).
class NativeFile {
 public:
  NativeFile(std::shared_ptr<NativeClient> owner, std::unique_ptr<File> file,
             uint64_t generation)
      : owner_(std::move(owner)),
        info_(file->info()),
        file_(std::move(file)),
        generation_(generation) {
    owner_->AddFile(this);
  }
  ~NativeFile() { owner_->RemoveFile(this); }

  const FileInfo& info() const { return info_; }

  // Dropped with its connection (the owner holds its lock; no Use is open).
  void Drop(bool abandon) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (abandon) {
      (void)file_.release();
    } else {
      file_.reset();
    }
  }

  size_t ReadInto(uint64_t offset, py::handle buffer) {
    WritableBuffer buf(buffer);
    // At or past the end (a seek may go there): 0, end of file, as read()
    // gives b"" (File::Read takes a position past the end for OutOfRange).
    if (offset >= info_.size || buf.span().empty()) return 0;
    absl::StatusOr<size_t> n;
    {
      py::gil_scoped_release nogil;
      n = ReadNoGil(offset, buf.span());
    }
    return ValueOrRaise(std::move(n), info_.path);
  }

  py::bytes Read(uint64_t offset, int64_t length) {
    const uint64_t size = info_.size;
    const uint64_t avail = offset >= size ? 0 : size - offset;
    const uint64_t want =
        length < 0 ? avail
                   : std::min<uint64_t>(avail, static_cast<uint64_t>(length));
    py::bytes out = NewBytes(want);
    absl::StatusOr<size_t> n = size_t{0};
    if (want > 0) {
      absl::Span<char> span = BytesSpan(out);
      py::gil_scoped_release nogil;
      n = ReadNoGil(offset, span);
    }
    ShrinkBytes(out, ValueOrRaise(std::move(n), info_.path));
    return out;
  }

 private:
  // Without the GIL.
  absl::StatusOr<size_t> ReadNoGil(uint64_t offset, absl::Span<char> out) {
    absl::StatusOr<NativeClient::Use> use = owner_->Acquire();
    if (!use.ok()) return use.status();
    absl::StatusOr<File*> file = Current(*use);
    if (!file.ok()) return file.status();
    return (*file)->Read(offset, out);
  }

  absl::StatusOr<File*> Current(const NativeClient::Use& use)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (file_ != nullptr && generation_ == use.generation()) return file_.get();
    absl::StatusOr<std::unique_ptr<File>> f = use->Open(info_.path);
    if (!f.ok()) return f.status();
    if ((*f)->info().version != info_.version) {
      return absl::FailedPreconditionError(
          absl::StrCat(info_.path, " changed since it was opened (version ",
                       info_.version, ", now ", (*f)->info().version, ")"));
    }
    file_ = std::move(*f);
    generation_ = use.generation();
    return file_.get();
  }

  const std::shared_ptr<NativeClient> owner_;
  const FileInfo info_;
  absl::Mutex mu_;
  std::unique_ptr<File> file_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_);
};

void NativeClient::DropConnectionLocked() {
  for (NativeFile* f : files_) f->Drop(/*abandon=*/false);
  for (NativeWriter* w : writers_) w->Drop(/*abandon=*/false);
  pool_.reset();
  // No call is in flight and the client's threads stop with it, so the
  // metadata cache it shares with warm_ is unlocked when the fork comes.
  if (client_ != nullptr) warm_ = client_->WarmState();
  client_.reset();
}

void NativeClient::AbandonIfForked() {
  if (pid_ == ::getpid()) return;
  for (NativeFile* f : files_) f->Drop(/*abandon=*/true);
  for (NativeWriter* w : writers_) w->Drop(/*abandon=*/true);
  (void)pool_.release();
  (void)client_.release();
  // Its metadata cache may be locked by a thread that did not come along.
  if (warm_ != nullptr) {
    (void)new std::shared_ptr<const ClientWarmState>(std::move(warm_));
    warm_ = nullptr;
  }
  in_flight_ = 0;  // Threads that were in calls did not come along.
  forking_ = false;
  pid_ = ::getpid();
}

void NativeClient::ParallelFor(size_t n,
                               const std::function<void(size_t)>& fn) {
  if (n <= 1) {
    if (n == 1) fn(0);
    return;
  }
  ThreadPool* pool;
  {
    absl::MutexLock lock(&mu_);
    if (pool_ == nullptr)
      pool_ = std::make_unique<ThreadPool>(read_threads_, "larder-py");
    pool = pool_.get();
  }
  larder::ParallelFor(*pool, n, fn);
}

// The module's calls: each takes a Use without the GIL, and raises with it.
template <typename T, typename Fn>
T Call(NativeClient& c, const std::string& path, Fn fn) {
  absl::StatusOr<T> r;
  {
    py::gil_scoped_release nogil;
    absl::StatusOr<NativeClient::Use> use = c.Acquire();
    if (use.ok()) {
      r = fn(*use);
    } else {
      r = use.status();
    }
  }
  return ValueOrRaise(std::move(r), path);
}

// Every entry of a directory, sorted: from the metadata cache when the
// directory fits in it, else page by page from the master.
absl::StatusOr<std::vector<FileInfo>> ListAll(Client& client,
                                              const std::string& path) {
  absl::StatusOr<std::shared_ptr<const std::vector<FileInfo>>> cached =
      client.ListDir(path);
  if (cached.ok()) return **cached;
  if (cached.status().code() != absl::StatusCode::kResourceExhausted)
    return cached.status();
  std::vector<FileInfo> all;
  std::string token;
  do {
    absl::StatusOr<ListResult> page = client.List(path, token, 1000, false);
    if (!page.ok()) return page.status();
    for (FileInfo& e : page->entries) all.push_back(std::move(e));
    token = std::move(page->next_page_token);
  } while (!token.empty());
  return all;
}

FileInfo Stat(NativeClient& c, const std::string& path) {
  return Call<FileInfo>(c, path,
                        [&](NativeClient::Use& u) { return u->Stat(path); });
}

std::vector<FileInfo> ListDir(NativeClient& c, const std::string& path) {
  return Call<std::vector<FileInfo>>(
      c, path, [&](NativeClient::Use& u) { return ListAll(u.client(), path); });
}

py::tuple List(NativeClient& c, const std::string& path,
               const std::string& token, int page_size, bool recursive) {
  ListResult page = Call<ListResult>(c, path, [&](NativeClient::Use& u) {
    return u->List(path, token, page_size, recursive);
  });
  return py::make_tuple(std::move(page.entries),
                        std::move(page.next_page_token));
}

std::unique_ptr<NativeFile> Open(NativeClient& c, const std::string& path) {
  uint64_t generation = 0;
  std::unique_ptr<File> f =
      Call<std::unique_ptr<File>>(c, path, [&](NativeClient::Use& u) {
        generation = u.generation();
        return u->Open(path);
      });
  return std::make_unique<NativeFile>(c.shared_from_this(), std::move(f),
                                      generation);
}

std::unique_ptr<NativeWriter> Create(NativeClient& c, const std::string& path,
                                     bool overwrite, uint64_t size_hint) {
  uint64_t generation = 0;
  WriteOptions o;
  o.overwrite = overwrite;
  o.size_hint = size_hint;
  std::unique_ptr<Writer> w =
      Call<std::unique_ptr<Writer>>(c, path, [&](NativeClient::Use& u) {
        generation = u.generation();
        return u->Create(path, o);
      });
  return std::make_unique<NativeWriter>(c.shared_from_this(), std::move(w),
                                        generation);
}

// The whole files of `paths` as one Client::ReadBatch: opened (metadata
// from the node's cache, else the master, in parallel on read_threads
// threads), the blocks of the worker on this node leased in one exchange
// per 64, then copied out one file at a time, each into a bytes object of
// its final size. The first open error (in the order of `paths`) is raised
// at construction.
class NativeBatch {
 public:
  // With `known` (one FileInfo per path, from a dataset's listing), files
  // are opened from it (Client::OpenKnown): no metadata lookup at all.
  NativeBatch(NativeClient& c, const std::vector<std::string>& paths,
              const std::vector<FileInfo>* known = nullptr)
      : paths_(paths) {
    auto open = [&](size_t i) {
      return known != nullptr ? (*use_)->OpenKnown((*known)[i])
                              : (*use_)->Open(paths[i]);
    };
    const size_t n = paths.size();
    std::vector<absl::StatusOr<std::unique_ptr<File>>> opened(n);
    absl::Status st;
    size_t failed = n;
    {
      py::gil_scoped_release nogil;
      absl::StatusOr<NativeClient::Use> u = c.Acquire();
      if (!u.ok()) {
        st = u.status();
      } else {
        use_.emplace(*std::move(u));
        // One by one while the metadata comes from the node's cache (a few
        // microseconds each: waking the pool would cost more); once one open
        // has to ask the master, the rest are opened in parallel.
        size_t i = 0;
        while (i < n) {
          const absl::Time start = absl::Now();
          opened[i] = open(i);
          ++i;
          if (absl::Now() - start > absl::Microseconds(200)) break;
        }
        c.ParallelFor(n - i, [&, i](size_t k) { opened[i + k] = open(i + k); });
        uint64_t bytes = 0;
        for (size_t k = 0; k < n && failed == n; ++k) {
          if (!opened[k].ok()) {
            st = opened[k].status();
            failed = k;
          } else {
            bytes += (*opened[k])->info().size;
            files_.push_back(*std::move(opened[k]));
          }
        }
        if (st.ok()) {
          KeepHeapForBatch(bytes);
          std::vector<File*> raw;
          raw.reserve(n);
          for (auto& f : files_) raw.push_back(f.get());
          batch_ = (*use_)->ReadBatch(raw);
        }
      }
    }
    if (!st.ok()) {
      Drop();
      OkOrRaise(st, failed < n ? paths[failed] : "");
    }
  }
  ~NativeBatch() { Drop(); }
  NativeBatch(const NativeBatch&) = delete;
  NativeBatch& operator=(const NativeBatch&) = delete;

  size_t size() const { return paths_.size(); }

  // File i, copied out now (without the GIL).
  py::bytes Read(size_t i) {
    py::bytes out = NewBytes(files_[i]->info().size);
    absl::Status st;
    {
      py::gil_scoped_release nogil;
      st = batch_->ReadInto(i, BytesSpan(out));
    }
    OkOrRaise(st, paths_[i]);
    return out;
  }

 private:
  // Gives the leases back and ends the call (without the GIL).
  void Drop() {
    py::gil_scoped_release nogil;
    batch_.reset();
    files_.clear();
    use_.reset();
  }

  const std::vector<std::string>& paths_;
  std::optional<NativeClient::Use> use_;
  std::vector<std::unique_ptr<File>> files_;
  std::unique_ptr<FileBatch> batch_;
};

py::list ReadMany(NativeClient& c, const std::vector<std::string>& paths) {
  NativeBatch batch(c, paths);
  py::list list(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) list[i] = batch.Read(i);
  return list;
}

// [fn(i, data_i) for each file], each file copied out just before its call,
// so that fn (a decoder) finds it in the CPU's cache. fn must not fork or
// close the client (the call holds it).
py::list ReadEach(NativeClient& c, const std::vector<std::string>& paths,
                  const py::function& fn) {
  NativeBatch batch(c, paths);
  py::list list(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) list[i] = fn(i, batch.Read(i));
  return list;
}

// ReadEach of files a dataset listed: sizes[i] and versions[i] are what the
// listing said of paths[i] (Client::OpenKnown), so no metadata is looked up;
// a file changed since raises ObjectChangedError, never mixed bytes.
py::list ReadEachKnown(NativeClient& c, const std::vector<std::string>& paths,
                       const std::vector<uint64_t>& sizes,
                       const std::vector<std::string>& versions,
                       const py::function& fn) {
  if (sizes.size() != paths.size() || versions.size() != paths.size())
    throw py::value_error("paths, sizes and versions differ in length");
  std::vector<FileInfo> known(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    known[i].path = paths[i];
    known[i].size = sizes[i];
    known[i].version = versions[i];
  }
  NativeBatch batch(c, paths, &known);
  py::list list(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) list[i] = fn(i, batch.Read(i));
  return list;
}

// Asks the owners to fetch these files. The files' metadata is looked up
// in parallel (a cold node cache asks the master once per file): groups of
// kPrefetchGroup files go out side by side on the read pool.
void Prefetch(NativeClient& c, const std::vector<std::string>& paths) {
  constexpr size_t kPrefetchGroup = 16;
  const size_t groups = (paths.size() + kPrefetchGroup - 1) / kPrefetchGroup;
  Call<bool>(c, paths.size() == 1 ? paths[0] : "",
             [&](NativeClient::Use& u) -> absl::StatusOr<bool> {
               std::vector<absl::Status> results(groups);
               c.ParallelFor(groups, [&](size_t g) {
                 const size_t begin = g * kPrefetchGroup;
                 const size_t end =
                     std::min(paths.size(), begin + kPrefetchGroup);
                 results[g] = u->Prefetch(std::vector<std::string>(
                     paths.begin() + begin, paths.begin() + end));
               });
               for (const absl::Status& st : results)
                 if (!st.ok()) return st;
               return true;
             });
}

// The whole file, into a bytes object allocated at its final size (one
// path of ReadMany: no pool thread is used for it).
py::bytes ReadFile(NativeClient& c, const std::string& path) {
  return ReadMany(c, {path})[0].cast<py::bytes>();
}

py::dict Stats(NativeClient& c) {
  const ClientStats s =
      Call<ClientStats>(c, "", [](NativeClient::Use& u) { return u->stats(); });
  py::dict d;
  d["blocks_short_circuit"] = s.blocks_short_circuit;
  d["blocks_grpc"] = s.blocks_grpc;
  d["blocks_under_store"] = s.blocks_under_store;
  d["failovers"] = s.failovers;
  d["ring_refreshes"] = s.ring_refreshes;
  d["metadata_hits"] = s.metadata_hits;
  d["metadata_misses"] = s.metadata_misses;
  d["metadata_node_hits"] = s.metadata_node_hits;
  d["metadata_stale_served"] = s.metadata_stale_served;
  d["metadata_entries"] = s.metadata_entries;
  d["metadata_bytes"] = s.metadata_bytes;
  d["metadata_evictions"] = s.metadata_evictions;
  d["metadata_invalidated"] = s.metadata_invalidated;
  return d;
}

}  // namespace
}  // namespace larder

PYBIND11_MODULE(_native, m) {
  using larder::Call;
  using larder::FileInfo;
  using larder::NativeClient;
  using larder::NativeFile;
  m.doc() = "The Larder client library (use the larder package, not this).";
  // Debian's Abseil locks with deadlock detection on: a process-wide graph
  // under one global lock on every Mutex lock (4x a lock's cost on one
  // thread, far more across threads). The client's threads start later.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  py::class_<FileInfo>(m, "FileInfo")
      .def_readonly("path", &FileInfo::path)
      .def_readonly("is_dir", &FileInfo::is_dir)
      .def_readonly("size", &FileInfo::size)
      .def_readonly("version", &FileInfo::version)
      .def_property_readonly(
          "mtime", [](const FileInfo& f) { return larder::ToSeconds(f.mtime); })
      .def_readonly("uid", &FileInfo::uid)
      .def_readonly("gid", &FileInfo::gid)
      .def_property_readonly(
          "mode",
          [](const FileInfo& f) { return f.mode != 0 ? f.mode : 0444u; })
      .def_property_readonly("name",
                             [](const FileInfo& f) {
                               const size_t slash = f.path.rfind('/');
                               return slash == std::string::npos
                                          ? f.path
                                          : f.path.substr(slash + 1);
                             })
      .def("__repr__", [](const FileInfo& f) {
        return absl::StrCat("FileInfo(path='", f.path, "', ",
                            f.is_dir ? "dir" : absl::StrCat("size=", f.size),
                            ")");
      });

  py::class_<NativeFile>(m, "File")
      .def_property_readonly("info", &NativeFile::info,
                             py::return_value_policy::reference_internal)
      .def("readinto", &NativeFile::ReadInto, py::arg("offset"),
           py::arg("buffer"))
      .def("read", &NativeFile::Read, py::arg("offset"),
           py::arg("length") = -1);

  py::class_<larder::NativeWriter>(m, "Writer")
      .def("write", &larder::NativeWriter::Write, py::arg("data"))
      .def("close", &larder::NativeWriter::Close)
      .def("abort", &larder::NativeWriter::Abort)
      .def_property_readonly("size", &larder::NativeWriter::size);

  py::class_<NativeClient, std::shared_ptr<NativeClient>>(m, "Client")
      .def(py::init<std::string, const py::dict&>(), py::arg("master"),
           py::arg("options"))
      .def_property_readonly(
          "master", [](const NativeClient& c) { return c.options().master; })
      .def("stat", &larder::Stat)
      .def("listdir", &larder::ListDir)
      .def("list", &larder::List, py::arg("path"), py::arg("token") = "",
           py::arg("page_size") = 1000, py::arg("recursive") = false)
      .def("open", &larder::Open)
      .def("create", &larder::Create, py::arg("path"),
           py::arg("overwrite") = false, py::arg("size_hint") = 0)
      .def("read", &larder::ReadFile)
      .def("read_many", &larder::ReadMany)
      .def("read_each", &larder::ReadEach)
      .def("read_each_known", &larder::ReadEachKnown)
      .def("prefetch", &larder::Prefetch)
      .def("cached_bytes",
           [](NativeClient& c, const std::string& path) {
             return Call<uint64_t>(c, path, [&](NativeClient::Use& u) {
               return u->CachedBytes(path);
             });
           })
      .def("stats", &larder::Stats)
      .def("close", &NativeClient::Close);

  // gRPC does not survive fork(): see NativeClient. Its default poller
  // (epoll1) also keeps one epoll set per process that outlives
  // grpc_shutdown, so a child made after a teardown would share it with a
  // parent that reconnects, and receive the parent's events. The poll()
  // poller keeps no kernel object; a client opens a few connections, where
  // poll() costs nothing more. Set before gRPC first starts in this process
  // (the module is the first user) unless the user chose a poller.
  if (grpc_is_initialized()) {
    PyErr_WarnEx(PyExc_RuntimeWarning,
                 "larder: gRPC was started in this process before larder was "
                 "imported; a fork() may not be safe",
                 1);
  } else {
    ::setenv("GRPC_POLL_STRATEGY", "poll", /*overwrite=*/0);
  }
  m.def("_before_fork", &NativeClient::QuiesceAll);
  m.def("_after_fork", &NativeClient::ResumeAll);
  py::module_::import("os").attr("register_at_fork")(
      py::arg("before") = m.attr("_before_fork"),
      py::arg("after_in_parent") = m.attr("_after_fork"),
      py::arg("after_in_child") = m.attr("_after_fork"));
}
