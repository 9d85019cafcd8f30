#!/usr/bin/env bash
# The figures that 2 cores hide, in one run of at most 9 minutes on a larger
# machine (16 cores or more), with a kit made by pack-kit.sh:
#
#   bench/scripts/pack-kit.sh .devkit/kit.tar.xz       # here, after a build
#   bench/scripts/device-check.sh .devkit/kit.tar.xz   # there
#
# Each step has a time limit of its own, so one that hangs costs its limit,
# not the run; each step prints under "=== HH:MM:SS step", its progress
# lines as they come (what a step that runs out of time had measured) and
# then its table.
# The store (s3rver processes and the shaping front) runs on the upper half
# of the cores and everything else on the lower half, as a store elsewhere
# would. Steps, in the order of what they decide:
#
#   1. warm small files through FUSE, 16 readers: the default daemon
#      (/dev/fuse), then FUSE over io_uring (enable_uring turned on);
#   2. the first epoch through the 25 ms front: plain GETs at 8-128 in
#      flight, FUSE shuffled and walking, `larder load` (with the fetches the
#      worker kept in flight), a cold 1 GiB shard and the trace of a cold
#      file;
#   3. `larder load` again with 128 fetch threads and 128 connections;
#   4. dataset reads while a checkpoint uploads (checkpoint_bench busy);
#   5. a DataLoader of 16 workers over FUSE against the page cache.
#
# Set DEVICE_CHECK_STEPS to a subset (e.g. "1 3") to run only those.
set -u
cd "$(dirname "$0")/../.."
kit=${1:?usage: bench/scripts/device-check.sh KIT.tar.xz}
run="bash bench/scripts/run-kit.sh $kit"
steps=${DEVICE_CHECK_STEPS:-1 2 3 4 5}
cores=$(nproc)
half=$((cores / 2))
pin=()
if [ "$cores" -ge 8 ]; then
  pin=(--store_cpus "$half-$((cores - 1))" --node_cpus "0-$((half - 1))")
fi
stores=$((half > 8 ? 8 : (half > 0 ? half : 1)))
export PYTHONUNBUFFERED=1

log() { echo; echo "=== $(date +%T) $*"; }
# Drops the daemons' log lines (glog-style I/W prefixes) from a step's output.
quiet() { grep -v -E '^[IWE][0-9]{4} ' || true; }
want() { [[ " $steps " == *" $1 "* ]]; }

log "machine: $cores cores, $(awk '/MemTotal/ {print int($2 / 1048576)}' /proc/meminfo) GiB," \
  "kernel $(uname -r); store on ${pin[*]:-the same cores}, $stores s3rver process(es)"

if want 1; then
  # FUSE over io_uring needs the module's switch (root; it changes nothing for
  # daemons that do not ask for it).
  uring=/sys/module/fuse/parameters/enable_uring
  [ -w "$uring" ] && echo Y >"$uring" 2>/dev/null
  log "enable_uring: $(cat "$uring" 2>/dev/null || echo absent)"
  for flags in "" "--fuse_channel=uring"; do
    log "1. small_files_bench --readers=16 ${flags:-(default daemon)}"
    timeout 60 $run small_files_bench --rounds=5 --readers=16 ${flags:+--fuse_flags=$flags} 2>&1 | quiet
  done
fi
cold() {
  timeout "$1" $run python3 bench/cold_read_bench.py --s3rvers "$stores" "${pin[@]}" \
    --parallel 8,32,64,128 "${@:2}" 2>&1 | quiet
}
if want 2; then
  log "2. cold_read_bench gets,fuse,walk,load,shard,trace"
  cold 170 --rows gets,fuse,walk,load,shard,trace --rounds 2 --shard_mib 1024
fi
if want 3; then
  log "3. cold_read_bench gets,load with 128 fetch threads and connections"
  cold 90 --rows gets,load --rounds 2 \
    --worker_flags=--fetch_threads=128,--http_max_connections=128
fi
if want 4; then
  log "4. checkpoint_bench larder,busy"
  timeout 100 $run python3 bench/checkpoint_bench.py --shard_mib 512 --s3rvers "$stores" \
    "${pin[@]}" --tools larder,busy --larder_reader cat --busy_readers 4 --busy_seconds 8 \
    --rounds 1 --dir /dev/shm 2>&1 | quiet
fi
if want 5; then
  log "5. python_loader_bench --fuse_only --workers 16"
  timeout 60 $run python3 bench/python_loader_bench.py --fuse_only --workers 16 --rounds 3 \
    2>&1 | quiet | tail -15
fi
log done
