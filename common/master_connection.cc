// Copyright 2026 The Larder Authors.
#include "common/master_connection.h"

#include <algorithm>
#include <atomic>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/log.h"

namespace larder {
namespace {

// How long a call waits for a leader while the masters answer "none".
constexpr absl::Duration kNoLeaderWait = absl::Seconds(10);

grpc::Status UnlistedLeader(absl::string_view asked, absl::string_view leader,
                            absl::string_view listed) {
  return grpc::Status(
      grpc::StatusCode::UNAVAILABLE,
      absl::StrCat("master ", asked, " says the leader is ", leader,
                   ", which is not one of the masters given (", listed,
                   "); only those are called: list every master in "
                   "--master"));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseMasterAddresses(
    absl::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view a :
       absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    a = absl::StripAsciiWhitespace(a);
    const size_t colon = a.rfind(':');
    int port = 0;
    // unix: targets have no port.
    if (!absl::StartsWith(a, "unix:") &&
        (colon == absl::string_view::npos || colon == 0 ||
         !absl::SimpleAtoi(a.substr(colon + 1), &port) || port <= 0 ||
         port > 65535)) {
      return absl::InvalidArgumentError(
          absl::StrCat("master address '", a,
                       "' is not HOST:PORT (several: a:7060,b:7060)"));
    }
    out.emplace_back(a);
  }
  if (out.empty())
    return absl::InvalidArgumentError("no master address given (HOST:PORT)");
  return out;
}

absl::StatusOr<std::unique_ptr<MasterConnection>> MasterConnection::Create(
    absl::string_view addresses,
    std::shared_ptr<const ChannelFactory> channels) {
  std::unique_ptr<MasterConnection> c(new MasterConnection);
  auto list = ParseMasterAddresses(addresses);
  if (!list.ok()) return list.status();
  c->list_ = *std::move(list);
  c->names_ = absl::StrJoin(c->list_, ",");
  c->channels_ = channels ? std::move(channels) : ChannelFactory::Insecure();
  absl::MutexLock lock(&c->mu_);
  c->current_ = c->list_[0];
  return c;
}

std::string MasterConnection::current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

MasterConnection::Target MasterConnection::TargetFor(
    const std::string& address) {
  Target& t = targets_[address];
  if (!t.stub) {
    grpc::ChannelArguments args;
    // A master that comes back is found again within a second.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    t.channel = channels_->Channel(address, args);
    t.stub = v1::Master::NewStub(t.channel);
  }
  return t;
}

grpc::Status MasterConnection::Run(
    absl::FunctionRef<grpc::Status(v1::Master::Stub&, grpc::ClientContext*)>
        call,
    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration backoff = absl::Milliseconds(50);
  int hops = 0;          // Redirects followed without a pause.
  size_t unreached = 0;  // Addresses in a row that could not be reached.
  size_t unlisted = 0;   // Answers that named a leader not in the list.
  grpc::Status last;
  // A master's own "no leader now" says more than a later timeout.
  grpc::Status no_leader;
  absl::Time no_leader_since = absl::InfiniteFuture();
  auto give_up = [&] { return no_leader.ok() ? last : no_leader; };
  while (true) {
    std::string address;
    Target target;
    {
      absl::MutexLock lock(&mu_);
      address = current_;
      target = TargetFor(address);
    }
    const absl::Duration remaining = deadline - absl::Now();
    // One paused master must not take the whole timeout of a call that has
    // others to try.
    absl::Duration attempt = remaining;
    if (several()) {
      const bool connected = target.channel->GetState(
                                 /*try_to_connect=*/true) == GRPC_CHANNEL_READY;
      attempt = std::min(remaining,
                         connected ? std::max(absl::Seconds(2), timeout / 3)
                                   : absl::Seconds(2));
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(
        std::chrono::system_clock::now() +
        absl::ToChronoMilliseconds(std::max(attempt, absl::Milliseconds(1))));
    last = call(*target.stub, &ctx);
    if (last.ok()) return last;

    const auto& trailers = ctx.GetServerTrailingMetadata();
    const auto hint = trailers.find(kLeaderTrailer);
    bool pause = true;
    if (hint != trailers.end()) {
      const std::string leader(hint->second.data(), hint->second.size());
      unreached = 0;
      const bool leader_listed =
          std::find(list_.begin(), list_.end(), leader) != list_.end();
      if (leader != "none" && leader != address && !leader_listed) {
        // Only the masters the caller named are called: a hint is a claim
        // of whoever answered (or of whoever wrote the election key), and
        // following it would hand the caller's token to any address.
        if (!several() || ++unlisted >= list_.size())
          return UnlistedLeader(address, leader, names_);
        // At most one line every 10 s: every call would say it.
        static std::atomic<int64_t> last_log_ns{0};
        const int64_t now = absl::GetCurrentTimeNanos();
        int64_t last = last_log_ns.load(std::memory_order_relaxed);
        if (now - last >= 10'000'000'000 &&
            last_log_ns.compare_exchange_strong(last, now)) {
          LARDER_LOG(WARNING, "master.leader_not_listed")
              .Field("asked", address)
              .Field("leader", leader)
              .Field("masters", names_);
        }
        absl::MutexLock lock(&mu_);
        auto it = std::find(list_.begin(), list_.end(), current_);
        current_ = it == list_.end() || ++it == list_.end() ? list_[0] : *it;
        pause = false;
      } else if (leader != "none" && leader != address && hops < 3) {
        absl::MutexLock lock(&mu_);
        current_ = leader;
        ++hops;
        pause = false;
      } else if (leader == "none") {
        no_leader = last;
        no_leader_since = std::min(no_leader_since, absl::Now());
        // An election takes a lease's time; much longer means the masters
        // cannot reach etcd, and the caller is told so.
        if (absl::Now() - no_leader_since > kNoLeaderWait) return no_leader;
      }
    } else if ((last.error_code() == grpc::StatusCode::UNAVAILABLE &&
                !FromLarderServer(last)) ||
               (last.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
                absl::Now() < deadline)) {
      // Not reached: try the next address (a leader hint that went away
      // sends us back to the list).
      if (!several()) return give_up();
      absl::MutexLock lock(&mu_);
      auto it = std::find(list_.begin(), list_.end(), current_);
      current_ = it == list_.end() || ++it == list_.end() ? list_[0] : *it;
      if (++unreached < list_.size()) pause = false;
      if (unreached >= list_.size()) unreached = 0;
    } else {
      return last;  // The leader's own answer.
    }
    if (!pause) {
      if (absl::Now() >= deadline) return give_up();
      continue;
    }
    if (absl::Now() + backoff >= deadline) return give_up();
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
    hops = 0;
  }
}

}  // namespace larder
