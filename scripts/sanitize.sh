#!/usr/bin/env bash
# Builds the unit tests, the fuzz tests and the worker's cluster test (a real
# `larder worker` over s3rver, with the data plane's attack tests) with
# AddressSanitizer and UndefinedBehaviorSanitizer into build-asan/ (or
# $LARDER_ASAN_BUILD_DIR), and runs them. Any sanitizer report fails the run:
# UBSan aborts on the first finding (-fno-sanitize-recover), ASan on its
# first error, LeakSanitizer at exit.
#
# Part of the test command (scripts/test.sh); ccache makes a rebuild cheap.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${LARDER_ASAN_BUILD_DIR:-build-asan}
jobs=${LARDER_JOBS:-2}
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DLARDER_SANITIZER=address,undefined -DLARDER_BUILD_BENCH=OFF >/dev/null
# Unit tests are every *_test beside its component (integration tests live in
# tests/); the fuzz and worker tests start the instrumented `larder` binary.
mapfile -t unit < <(ninja -C "$build_dir" -t targets all |
  sed -n 's/^\([a-z_]*\/[a-z_]*_test\): CXX_EXECUTABLE_LINKER.*/\1/p' | grep -v '^tests/')
cmake --build "$build_dir" -j "$jobs" --target larder tests/fuzz_test tests/worker_test \
  "${unit[@]}"
export ASAN_OPTIONS="abort_on_error=0:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
cd "$build_dir"
echo "sanitize: unit tests"
ctest --output-on-failure -j "$jobs" --timeout 600 -L unit
echo "sanitize: fuzz and worker tests (live worker processes)"
ctest --output-on-failure -j "$jobs" --timeout 600 -R '^(FuzzTest|WorkerTest)\.'
