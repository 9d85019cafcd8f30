#!/usr/bin/env bash
# The main job on the embedded default: a real local Larder cluster over a
# local directory as under-store.
#
#   1. installs what is missing and builds;
#   2. generates a sample dataset (480 image-like files in class folders + a
#      64 MiB shard);
#   3. starts one master and two workers on loopback (each worker with a RAM
#      tier, an NVMe-style directory tier and a short-circuit socket);
#   4. mounts the dataset at /datasets/sample, preloads it (larder load), reads
#      it twice through the cache (larder cp), checks both copies byte for
#      byte, mounts the cluster with `larder fuse` and compares the mounted
#      tree with the source (diff -r), and prints larder ring and larder
#      stats: every block was fetched from the under-store once (by the
#      load), every later read was a cache hit.
#
# Leaves nothing running: the cluster is stopped on exit, even on failure.
#
#   scripts/run-local.sh [WORKDIR]     (default /tmp/larder-demo)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
# `import larder` for Debian's /usr/bin/python3 (into /usr/local/lib/python3.*/dist-packages).
cmake --install "${LARDER_BUILD_DIR:-build}" --component python >/dev/null
echo "installed the Python client: $(/usr/bin/python3 -c 'import larder; print(larder.__file__)')"
larder="$PWD/${LARDER_BUILD_DIR:-build}/cli/larder"
work=${1:-/tmp/larder-demo}
rm -rf "$work" && mkdir -p "$work"
dataset="$work/dataset"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

echo "== generating a sample dataset in $dataset"
/usr/bin/python3 - "$dataset" <<'PY'
import os, random, sys
root = sys.argv[1]
r = random.Random(42)
total = 0
for split, count in (("train", 400), ("val", 80)):
    for i in range(count):
        d = os.path.join(root, split, "n%08d" % (i % 8))
        os.makedirs(d, exist_ok=True)
        size = r.choice((r.randint(20_000, 200_000), r.randint(200_000, 2_000_000)))
        with open(os.path.join(d, "img_%05d.jpg" % i), "wb") as f:
            f.write(r.randbytes(size))
        total += size
with open(os.path.join(root, "shard-000.tar"), "wb") as f:
    f.write(r.randbytes(64 << 20)); total += 64 << 20
print("generated 481 files, %.1f MB" % (total / 1e6))
PY

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
master_port=$(free_port)
export LARDER_MASTER="127.0.0.1:$master_port"

echo
echo "== starting a master and two workers (logs in $work/*.log)"
"$larder" master --master_listen="$LARDER_MASTER" --master_metrics_listen="127.0.0.1:$(free_port)" \
  --state_dir="$work/master" --allowed_file_roots="$dataset" >"$work/master.log" 2>&1 &
pids+=($!)
for w in 1 2; do
  "$larder" worker --master="$LARDER_MASTER" --worker_id="worker-$w" \
    --listen="127.0.0.1:$(free_port)" --metrics_listen="127.0.0.1:$(free_port)" \
    --short_circuit_socket="$work/worker-$w.sock" --ram_capacity=512MiB \
    --nvme="$work/nvme-$w:1GiB" --nvme_reserve=256MiB --allowed_file_roots="$dataset" \
    >"$work/worker-$w.log" 2>&1 &
  pids+=($!)
done
for i in $(seq 1 100); do
  if "$larder" ring 2>/dev/null | grep -q "2 workers"; then break; fi
  sleep 0.1
done
"$larder" ring

echo
echo "== larder mount /datasets/sample file://$dataset"
"$larder" mount /datasets/sample "file://$dataset"
echo
echo "== larder ls /datasets/sample"
"$larder" ls /datasets/sample
echo
echo "== larder load /datasets/sample"
"$larder" load /datasets/sample
for pass in 1 2; do
  echo
  echo "== read pass $pass: larder cp /datasets/sample $work/pass-$pass"
  "$larder" cp /datasets/sample "$work/pass-$pass"
  diff -r "$dataset" "$work/pass-$pass" && echo "pass $pass: identical to the source, $(find "$work/pass-$pass" -type f | wc -l) files"
done
echo
echo "== larder fuse $work/mnt: the same dataset as files, for training code"
mkdir -p "$work/mnt"; : >"$work/fuse.log"
"$larder" fuse "$work/mnt" --fuse_metrics_listen="127.0.0.1:$(free_port)" >"$work/fuse.log" 2>&1 &
fuse_pid=$!
pids=("$fuse_pid" "${pids[@]}")  # Unmounted first on exit.
for i in $(seq 1 100); do
  if grep -q "mounted" "$work/fuse.log"; then break; fi
  sleep 0.1
done
ls "$work/mnt" "$work/mnt/datasets/sample"
diff -r "$dataset" "$work/mnt/datasets/sample" && echo "FUSE: identical to the source, $(find "$work/mnt/datasets/sample" -type f | wc -l) files"
kill -TERM "$fuse_pid"; wait "$fuse_pid" || true
echo
echo "== the Python client: a PyTorch DataLoader over /datasets/sample/train (larder.torch)"
(cd / && /usr/bin/python3 - "$dataset" <<'PY'
import hashlib, os, sys
import torch
from torch.utils.data import DataLoader, RandomSampler
from larder.torch import LarderMapDataset, PrefetchSampler

root = sys.argv[1]
def check(s):  # Each sample is compared with the source file.
    with open(os.path.join(root, s.path[len("/datasets/sample/"):]), "rb") as f:
        return int(f.read() == s.data), s.target
ds = LarderMapDataset.from_prefix("/datasets/sample/train", transform=check)
loader = DataLoader(ds, batch_size=32, num_workers=2,
                    sampler=PrefetchSampler(RandomSampler(ds), ds))
ok = sum(int(same.sum()) for same, _ in loader)
print("DataLoader read %d of %d samples identical to the source, %d classes" %
      (ok, len(ds), len(ds.classes)))
sys.exit(0 if ok == len(ds) else 1)
PY
)
echo
echo "== larder stats"
"$larder" stats
echo
echo "Every block was fetched from the under-store once (misses, by the load); both read passes"
echo "were served from the workers' caches (hits; short-circuit, since the workers are on this node)."
echo "Stopping the cluster."
