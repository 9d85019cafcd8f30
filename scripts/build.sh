#!/usr/bin/env bash
# Configures and builds Larder into build/ (or $LARDER_BUILD_DIR) with Ninja.
# Extra arguments go to cmake's configure step, e.g. -DLARDER_SANITIZER=address.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${LARDER_BUILD_DIR:-build}
jobs=${LARDER_JOBS:-2}
# ccache hits across checkouts at different paths (a fresh CI clone reuses
# what the working tree compiled): paths under the checkout are hashed
# relative to it, and the working directory is not hashed.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=${LARDER_BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
cmake --build "$build_dir" -j "$jobs"
