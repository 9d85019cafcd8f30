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
# A failed test is run once more before it counts: WorkerTest.ShortCircuitBatchesMixHitsMissesAndErrors
# failed once in ~15 suite runs ("peer closed the connection" on the first batched OPEN), cause not
# yet found (see the closing note of 2026-11-22). A test that fails twice still fails the run.
ctest --output-on-failure -j "${LARDER_JOBS:-2}" --timeout 600 --repeat until-pass:2
)
scripts/sanitize.sh
