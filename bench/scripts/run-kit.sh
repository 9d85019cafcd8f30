#!/usr/bin/env bash
# Runs a benchmark of this checkout with a kit made by pack-kit.sh, on a
# machine that has none of the build's dependencies (Python 3 and a Linux
# with glibc 2.36 or later are enough):
#
#   bench/scripts/run-kit.sh KIT.tar.xz COMMAND [ARG...]
#
# e.g. bench/scripts/run-kit.sh kit.tar.xz python3 bench/checkpoint_bench.py \
#        --shard_mib 512 --s3rvers 8 --tools s3fs,direct,larder,busy
#
# It unpacks the kit (into $LARDER_KIT_DIR, default /tmp/larder-kit), puts its
# bin/ first on PATH and its lib/ on LD_LIBRARY_PATH, links its s3rver into
# tests/servers/node_modules when that is missing, points LARDER_CLI at its
# larder and places it where the C++ benchmarks look for it (they name the
# build's path, fixed when they were compiled), makes /dev/fuse if the
# machine has none, then runs COMMAND in the checkout's root.
set -euo pipefail
cd "$(dirname "$0")/../.."
kit_archive=${1:?usage: bench/scripts/run-kit.sh KIT.tar.xz COMMAND [ARG...]}
shift
kit=${LARDER_KIT_DIR:-/tmp/larder-kit}
if [ ! -f "$kit/COMMIT" ] || [ "$kit_archive" -nt "$kit/COMMIT" ]; then
  rm -rf "$kit"
  mkdir -p "$kit"
  if command -v xz >/dev/null; then
    xz -dc "$kit_archive" | tar -C "$kit" -xf -
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$kit_archive" "$kit"
  fi
  # tar gives COMMIT the archive's own (older) time: without this every
  # call would unpack the kit again, and lose what was put beside it.
  touch "$kit/COMMIT"
fi
export PATH="$kit/bin:$PATH"
export LD_LIBRARY_PATH="$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LARDER_CLI="$kit/bin/larder"
[ -e tests/servers/node_modules/s3rver ] || {
  mkdir -p tests/servers
  ln -sfn "$kit/node_modules" tests/servers/node_modules
}
# The C++ benchmarks start the larder binary at the path they were built
# with (and find bench/scripts there): put both where they look.
built=$(grep -a -o -m1 -E '/[[:alnum:]_./-]*/cli/larder' "$kit/bin/small_files_bench" | head -1 || true)
if [ -n "$built" ] && [ ! -x "$built" ]; then
  src=${built%/build*/cli/larder}
  if [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")"; ln -sfn "$PWD" "$src"; fi
  mkdir -p "$(dirname "$built")"
  ln -sfn "$kit/bin/larder" "$built"
fi
[ -e /dev/fuse ] || mknod -m 0666 /dev/fuse c 10 229 || true
exec "$@"
