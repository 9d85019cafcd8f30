#!/usr/bin/env bash
# The test command: installs what is missing, checks formatting, builds, and runs
# the whole suite (unit + integration tests with real servers) with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/check-format.sh
scripts/build.sh
cd "${LARDER_BUILD_DIR:-build}"
ctest --output-on-failure -j "${LARDER_JOBS:-2}" --timeout 600
