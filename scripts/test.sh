#!/usr/bin/env bash
# The test command: installs what is missing, checks formatting, builds, checks the
# thread-safety annotations with clang, runs the whole suite (unit + integration
# tests with real servers) with CTest, then the unit, fuzz and worker tests again
# built with AddressSanitizer and UBSan (scripts/sanitize.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage says how long it took (CI should stay well under 30 minutes).
stage() {
  local start=$SECONDS
  "$@"
  echo "test.sh: $1 took $((SECONDS - start)) s"
}
stage scripts/install-deps.sh
stage scripts/check-format.sh
stage scripts/build.sh
# GCC ignores the thread-safety annotations; clang's analysis checks them.
stage scripts/check-thread-safety.sh "${LARDER_BUILD_DIR:-build}"
# No retries: a test that fails once fails the run (a flaky test is a bug).
stage ctest --test-dir "${LARDER_BUILD_DIR:-build}" --output-on-failure \
  -j "${LARDER_JOBS:-2}" --timeout 600
stage scripts/sanitize.sh
