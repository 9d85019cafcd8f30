// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: commands.h
// -----------------------------------------------------------------------------
//
// Subcommands of the `larder` binary. Each takes its positional arguments
// (flags are already parsed) and returns a status; main() turns that into one
// message on stderr and an exit code (ExitCodeFor).
#ifndef LARDER_CLI_COMMANDS_H_
#define LARDER_CLI_COMMANDS_H_

#include <grpcpp/support/status.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/config.h"
#include "common/master_connection.h"
#include "larder/client.h"
#include "proto/master.pb.h"

namespace larder::cli {

struct Command {
  absl::string_view name;
  absl::string_view summary;
  absl::string_view usage;  // Synopsis, arguments and what it does.
  absl::Status (*run)(const std::vector<std::string>& args);
  // Every flag the command takes (names without dashes), listed by --help;
  // any other flag is a usage error.
  std::vector<absl::string_view> flags;
};

// Flag groups shared by several commands (concatenated with FlagList).
inline constexpr absl::string_view kLogFlags[] = {"log_level"};
inline constexpr absl::string_view kHttpFlags[] = {
    "http_max_connections",  "http_connect_timeout", "store_timeout",
    "http_request_timeout",  "http_low_speed_limit", "http_low_speed_time",
    "http_ca_bundle",        "http_verify_tls",      "retry_max_attempts",
    "retry_initial_backoff", "retry_max_backoff"};
// A caller of the master (and, for reads, of workers).
inline constexpr absl::string_view kClientFlags[] = {
    "master",          "tls_ca_file", "tls_cert_file",   "tls_key_file",
    "tls_server_name", "token_file",  "admin_token_file"};
// A daemon serving gRPC (which also calls the master or the workers).
inline constexpr absl::string_view kServerFlags[] = {
    "tls_cert_file",           "tls_key_file",         "tls_ca_file",
    "tls_require_client_cert", "tls_admin_identities", "auth_tokens_file",
    "allow_insecure_network",  "token_file",           "tls_server_name",
    "admin_token_file"};

// The concatenation of flag groups and names, duplicates dropped.
std::vector<absl::string_view> FlagList(
    std::initializer_list<absl::Span<const absl::string_view>> groups);

// Every command of the binary, in the order `larder --help` lists them.
absl::Span<const Command* const> AllCommands();
// The command named `name`, or null.
const Command* FindCommand(absl::string_view name);

// `larder store ls|stat|cat|copy ...`: direct access to an under-store.
absl::Status RunStore(const std::vector<std::string>& args);
extern const Command kStoreCommand;
// `larder worker ...`: a cache worker.
extern const Command kWorkerCommand;
// `larder fuse MOUNTPOINT`: the FUSE adaptor.
extern const Command kFuseCommand;
// `larder csi`: the CSI node plugin (csi_command.cc).
extern const Command kCsiCommand;
// Cluster commands (cluster_commands.cc).
extern const Command kMasterCommand, kMountCommand, kUnmountCommand, kLsCommand,
    kStatCommand, kCatCommand, kCpCommand, kLoadCommand, kInvalidateCommand,
    kEvictCommand, kStatsCommand, kRingCommand;
// `larder advise PATH` (advise_command.cc).
extern const Command kAdviseCommand;
// `larder version`, `larder completion bash` (meta_commands.cc).
extern const Command kVersionCommand, kCompletionCommand;

// --output: "table" (default) or "json". Error: InvalidArgument.
absl::StatusOr<bool> JsonOutput();

// The master address: --master, else $LARDER_MASTER, else "" (standalone).
std::string MasterAddress();
// The same, 127.0.0.1:7060 when unset.
std::string MasterOrDefault();
// The connection to the master (or the leader of several), with the TLS and
// token flags applied. Errors: a bad --master, a token or PEM file that
// cannot be read.
absl::StatusOr<std::unique_ptr<MasterConnection>> Stub();
// A master call's status, with what to check when it could not be reached.
absl::Status Rpc(const grpc::Status& s);
// What the master says `path` is (Stat).
absl::StatusOr<v1::StatResponse> StatPath(MasterConnection& master,
                                          const std::string& path);
// A client of the cluster from the flags (ClientOptionsFromFlags); an
// unreachable master is Rpc's message.
absl::StatusOr<std::unique_ptr<Client>> ConnectClient();
// Sends `req` to every worker of the ring (which it returns in `ring` when
// not null); the blocks they evicted. Errors: the first worker's failure,
// named.
absl::StatusOr<uint64_t> EvictOnEveryWorker(MasterConnection& master,
                                            const v1::EvictBlocksRequest& req,
                                            v1::Ring* ring = nullptr);
// InvalidArgument("usage: USAGE") unless there are `n` arguments.
absl::Status WantArgs(const std::vector<std::string>& args, size_t n,
                      absl::string_view usage);
// Local time, to the second.
std::string FormatTime(int64_t unix_ns);

// The client options of every command that reads through the cache (the
// FUSE daemon, ls, stat, cat, cp), from their flags: the master, TLS and the
// token, this node, the metadata cache, and the HTTP settings of the direct
// under-store read. Errors: InvalidArgument (a bad size).
absl::StatusOr<ClientOptions> ClientOptionsFromFlags();
// Flags ClientOptionsFromFlags reads, for the commands' flag lists.
inline constexpr absl::string_view kClientReadFlags[] = {
    "node", "metadata_cache_entries", "metadata_cache_bytes",
    "metadata_stale_window"};
// Flags of the commands that write into the cluster (cp, fuse).
inline constexpr absl::string_view kClientWriteFlags[] = {"parallel_writes"};

// A uid (or, with `group`, a gid) given as a number or a name of the user
// (group) database. Error: InvalidArgument naming `flag`.
absl::StatusOr<uint32_t> ParseAccountId(absl::string_view flag,
                                        const std::string& name, bool group);

// How a daemon's gRPC port is secured, for its start-up lines: "TLS, client
// certificates checked, bearer tokens", "plaintext, no authentication".
std::string DescribeSecurity(const SecurityOptions& security);

// Exit code for a status: 0 OK, 2 usage (InvalidArgument; AlreadyExists: a
// request that conflicts with the cluster, e.g. a path mounted from another
// URI), 3 NotFound,
// 4 PermissionDenied/Unauthenticated, 5 Unavailable/DeadlineExceeded,
// 6 FailedPrecondition (changed data), 1 anything else.
int ExitCodeFor(const absl::Status& status);

}  // namespace larder::cli

#endif  // LARDER_CLI_COMMANDS_H_
