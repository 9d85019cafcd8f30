// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: outage_pause.h
// -----------------------------------------------------------------------------
//
// A pause in asking something that is down (an under-store, per mount): after
// a try fails with an outage, callers are answered with that failure at once,
// without asking, for a pause of `first` (1 s), doubled after every try that
// fails again, up to `max` (30 s). When a pause ends, one caller makes the
// next try while the others are still answered at once; the first success
// ends the outage. Each try of a store that is down costs its caller the
// store's retries (seconds), and the store a request per caller: the pause
// bounds both to one try per pause.
//
//   OutagePause pause;
//   if (std::optional<OutagePause::Outage> o = pause.Check(mount, now))
//     return o->why;                        // Down: not asked.
//   absl::StatusOr<T> r = AskTheStore();
//   if (IsOutage(r.status())) pause.Failed(mount, now, r.status());
//   else pause.Succeeded(mount);            // Or Abandoned(mount, now).
//
// Thread-safe.
#ifndef LARDER_COMMON_OUTAGE_PAUSE_H_
#define LARDER_COMMON_OUTAGE_PAUSE_H_

#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace larder {

class OutagePause {
 public:
  struct Options {
    absl::Duration first = absl::Seconds(1);
    absl::Duration max = absl::Seconds(30);
    // A try that has not reported (Failed, Succeeded, Abandoned) for this
    // long no longer holds the others back: the next caller tries.
    absl::Duration try_timeout = absl::Minutes(2);
  };
  OutagePause() : OutagePause(Options{}) {}
  explicit OutagePause(Options options) : options_(options) {}

  struct Outage {
    absl::Status why;     // The failure of the last try.
    absl::Duration left;  // Until the next try (zero: a try is in flight).
  };
  // The outage of `key`, when its callers are to be answered without
  // asking; nullopt when this caller asks. A caller that asks after a pause
  // ended is the one try: it must report how it went.
  std::optional<Outage> Check(const std::string& key, absl::Time now);
  // A try that began at `started` failed with an outage: a new pause, or
  // the pause doubled. Tries that began before the current pause was set
  // (concurrent with the one that set it) leave it as it is, so failures
  // that came together double it once.
  void Failed(const std::string& key, absl::Time started, absl::Time now,
              const absl::Status& why);
  // The thing answered (with any answer but an outage): the outage is over.
  void Succeeded(const std::string& key);
  // The try that began at `started` (the time given to Check) learned
  // nothing of the thing (its caller failed before it asked): the next
  // caller tries instead. From a caller that was not the try (one that
  // asked without Check, or while no pause held), nothing changes.
  void Abandoned(const std::string& key, absl::Time started);

  // Keys in an outage now (for tests and metrics).
  size_t outages() const;

 private:
  struct State {
    absl::Time until;
    absl::Duration pause;
    absl::Status why;
    absl::Time trying_since = absl::InfinitePast();  // The one try's start.
    bool trying = false;
  };

  const Options options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, State> down_ ABSL_GUARDED_BY(mu_);
};

}  // namespace larder

#endif  // LARDER_COMMON_OUTAGE_PAUSE_H_
