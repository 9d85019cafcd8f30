// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: options.h
// -----------------------------------------------------------------------------
//
// Options of an under-store that do not belong in its URI: transport settings
// and credentials (a URI is stored in mount tables and printed in logs, so it
// never carries a secret).
#ifndef LARDER_UNDERSTORE_OPTIONS_H_
#define LARDER_UNDERSTORE_OPTIONS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/config.h"
#include "understore/aws_credentials.h"

namespace larder {

// Azure credentials: a base64 account key (Shared Key) or a SAS token.
struct AzureCredentials {
  std::string key;
  std::string sas;
};

struct UnderStoreOptions {
  HttpOptions http;
  // S3: credentials to use instead of the environment / credentials file.
  std::optional<AwsCredentials> aws_credentials;
  // Azure: credentials to use instead of the environment.
  std::optional<AzureCredentials> azure_credentials;
  // S3: environment lookup for credentials and region (tests inject one).
  EnvLookup env = ProcessEnv();
  // hdfs://: the longest one List call may take, all its namenode requests
  // together; a namenode that keeps answering pages that lead nowhere is cut
  // off here with DeadlineExceeded. Default 5 min (a page is at most
  // page_size entries: seconds on a healthy namenode).
  absl::Duration list_deadline = absl::Minutes(5);
  // file:// mounts (OpenMountStore): the directories a mount's root must be
  // in (after symlinks are resolved). Unset: any directory, for tools that
  // run as the invoking user (`larder store`); the master and workers always
  // set it, from --allowed_file_roots (empty: no file:// mount at all).
  std::optional<std::vector<std::string>> allowed_file_roots;
};

}  // namespace larder

#endif  // LARDER_UNDERSTORE_OPTIONS_H_
