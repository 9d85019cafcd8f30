#!/usr/bin/env bash
# The test command: installs what is missing, checks formatting, builds, checks the
# thread-safety annotations with clang, runs the whole suite (unit + integration
# tests with real servers) with CTest, then the unit, fuzz and worker tests again
# built with AddressSanitizer and UBSan (scripts/sanitize.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/check-format.sh
scripts/build.sh
# GCC ignores the thread-safety annotations; clang's analysis checks them.
scripts/check-thread-safety.sh "${LARDER_BUILD_DIR:-build}"
(
cd "${LARDER_BUILD_DIR:-build}"
# No retries: a test that fails once fails the run (a flaky test is a bug).
ctest --output-on-failure -j "${LARDER_JOBS:-2}" --timeout 600
)
scripts/sanitize.sh
