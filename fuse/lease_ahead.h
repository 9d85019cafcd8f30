// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: lease_ahead.h
// -----------------------------------------------------------------------------
//
// The objects of files the daemon expects to be opened soon, leased from the
// worker on this node ahead of their opens, in batches: a passthrough open
// then costs no exchange with the worker.
//
// Without it every open of a file that the kernel does not still hold asks
// the worker for the file's memfd (EXPORT): one round trip over the
// short-circuit socket, with a wake-up of the worker and one of the daemon,
// for each file (small_files_bench, 2 cores: 15-18 us of worker CPU per
// file beside the daemon's 47-60). Here an open that finds nothing leased
// asks, in its one exchange, for the next 63 files of its directory's
// listing too (after it, in listing order, wrapping at the end); a
// `readdir` of a directory asks (in the background) for its first `batch`
// files; and taking the middle file of a batch asks (in the background)
// for the `batch` files after the batch's last, up to the end of the
// listing, so a reader that walks a directory in order finds every file
// leased. Readers in a shuffled order find the files near the ones they
// opened.
//
// Bounded: at most `capacity` objects are held (each is a descriptor, and
// the worker keeps its blocks in RAM while leased); an object not opened
// within `keep` is given back. A file whose version changed is not handed
// out (the version is checked at Take). Thread-safe; one background thread.
#ifndef LARDER_FUSE_LEASE_AHEAD_H_
#define LARDER_FUSE_LEASE_AHEAD_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "larder/client.h"

namespace larder {

class LeaseAhead {
 public:
  struct Options {
    // Objects held at most (0: off).
    size_t capacity = 4096;
    // An object leased ahead and not opened within this is given back.
    absl::Duration keep = absl::Seconds(10);
    // Objects asked for per request (64 go in one exchange with the
    // worker).
    size_t batch = 256;
    // Bytes of the objects held at most: the worker keeps a leased object
    // in RAM (it was there already) until it is given back.
    uint64_t max_bytes = uint64_t{1} << 30;
    // Only files at least `min_size` (FuseOptions::passthrough_min_size)
    // and at most `max_size` large (a larger file's reads cost far more
    // than its open's exchange); empty files never (they have no memfd).
    uint64_t min_size = 0;
    uint64_t max_size = 16 << 20;
    // Whether `path` is already open for passthrough, or kept after its
    // last close (InodeTable): not leased again. May be empty.
    std::function<bool(const std::string& path)> has_backing;
  };
  // What happened to the objects leased ahead (since the start).
  struct Counters {
    uint64_t leased = 0;   // Granted by the worker.
    uint64_t used = 0;     // Taken by an open.
    uint64_t expired = 0;  // Given back unopened (time, version, stop).
    uint64_t refused = 0;  // Asked for, not granted (not in RAM...).
  };

  LeaseAhead(Options options, Client& client);
  // Stops the background thread and gives every held object back.
  ~LeaseAhead();
  LeaseAhead(const LeaseAhead&) = delete;
  LeaseAhead& operator=(const LeaseAhead&) = delete;

  bool enabled() const { return options_.capacity > 0; }

  // The object of cluster path `path` at `version`, if one was leased
  // ahead and is still in time; taken out of the table (the caller's hold
  // now keeps the lease).
  std::optional<LocalSlice> Take(const std::string& path,
                                 absl::string_view version);
  // `file`'s object (File::OpenLocalObject), for an open of cluster path
  // `path` that found none leased: asked for in the same exchange as the
  // next files of its directory's listing (up to 64 in all), which are
  // leased for the opens that follow, when the node's metadata cache holds
  // that listing (else it is listed in the background: an open never waits
  // for the master). Its errors are OpenLocalObject's. A directory whose
  // files the worker did not lend (owned by other nodes, not in its RAM),
  // or that could not be listed, is not batched for `keep`.
  absl::StatusOr<LocalSlice> LeaseAround(const std::string& path, File& file);
  // Asks (in the background) for the first files of directory `dir` (a
  // readdir of it began).
  void WantDir(const std::string& dir);

  Counters counters() const;
  // Objects granted and not yet taken (entries still being asked for the
  // worker are not counted).
  size_t held() const;

  // The background work, run now (tests): every request queued so far.
  void Drain();

 private:
  struct Entry {
    std::string version;
    uint64_t size = 0;
    std::optional<LocalSlice> object;  // None while being leased.
    absl::Time until;
    // Taking this entry asks for the files after `next` (the last of its
    // batch): a reader in listing order never waits for a batch.
    std::string next;
  };
  // A request: the files after `after` in the listing of `dir` ("" for its
  // first files), and with `wrap` those from its start next.
  struct Want {
    std::string dir;
    std::string after;
    bool wrap = false;
  };

  void Enqueue(Want want) ABSL_LOCKS_EXCLUDED(mu_);
  void Loop();
  // Leases up to `batch` files for `want`; with `self` (the file after
  // which they come), its object too, in the same exchange, returned (none:
  // the listing is not cached; `self` was not asked for).
  std::optional<absl::StatusOr<LocalSlice>> Serve(const Want& want,
                                                  size_t batch,
                                                  File* self = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Gives back the entries whose time is up (their holds are dropped by
  // the caller, outside the lock).
  void Expire(absl::Time now, std::vector<LocalSlice>& drop)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  Client& client_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  // Paths in the order they were added (so by `until`); an entry taken or
  // replaced since is skipped.
  std::deque<std::pair<absl::Time, std::string>> order_ ABSL_GUARDED_BY(mu_);
  std::deque<Want> queue_ ABSL_GUARDED_BY(mu_);
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Counters counters_ ABSL_GUARDED_BY(mu_);
  // Directories not batched until then (see LeaseAround).
  absl::flat_hash_map<std::string, absl::Time> futile_ ABSL_GUARDED_BY(mu_);
  bool Futile(const std::string& dir, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NoteFutile(const std::string& dir, absl::Time until)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // Of entries_, in flight too.
  // Removes entry `it`, its object to `drop`.
  void Erase(absl::flat_hash_map<std::string, Entry>::iterator it,
             std::vector<LocalSlice>& drop) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::thread thread_;
};

}  // namespace larder

#endif  // LARDER_FUSE_LEASE_AHEAD_H_
