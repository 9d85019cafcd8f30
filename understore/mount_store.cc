// Copyright 2026 The Larder Authors.
#include "understore/mount_store.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "understore/aws_credentials.h"
#include "understore/factory.h"

namespace larder {

absl::StatusOr<std::unique_ptr<UnderStore>> OpenMountStore(
    const v1::MountEntry& mount, const UnderStoreOptions& base) {
  UnderStoreOptions o = base;
  absl::string_view ref = mount.credentials();
  if (!ref.empty()) {
    if (!absl::ConsumePrefix(&ref, "profile:") || ref.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mount ", mount.path(), ": unknown credentials reference '",
          mount.credentials(), "' (want profile:NAME)"));
    }
    LARDER_ASSIGN_OR_RETURN(AwsCredentials c,
                            LoadAwsCredentials(ref, base.env));
    o.aws_credentials = c;
  }
  return OpenUnderStore(mount.uri(), o);
}

absl::StatusOr<std::shared_ptr<UnderStore>> MountStores::Get(
    const v1::MountEntry& mount) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = stores_.find(mount.path());
        it != stores_.end() && it->second.uri == mount.uri() &&
        it->second.credentials == mount.credentials())
      return it->second.store;
  }
  LARDER_ASSIGN_OR_RETURN(std::unique_ptr<UnderStore> opened,
                          OpenMountStore(mount, base_));
  std::shared_ptr<UnderStore> store(std::move(opened));
  absl::MutexLock lock(&mu_);
  stores_[mount.path()] = Opened{mount.uri(), mount.credentials(), store};
  return store;
}

void MountStores::Drop(const std::string& path) {
  absl::MutexLock lock(&mu_);
  stores_.erase(path);
}

}  // namespace larder
