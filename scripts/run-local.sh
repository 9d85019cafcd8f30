#!/usr/bin/env bash
# The main job on the embedded default (a local directory as under-store):
# installs what is missing, builds, generates a sample dataset, then reads it
# through Larder's under-store layer — list, stat, and a verified parallel copy —
# and prints what it did. Leaves nothing running.
#
#   scripts/run-local.sh [WORKDIR]     (default /tmp/larder-demo)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
larder="$PWD/${LARDER_BUILD_DIR:-build}/cli/larder"
work=${1:-/tmp/larder-demo}
rm -rf "$work" && mkdir -p "$work"
dataset="$work/dataset"

echo "== generating a sample dataset in $dataset"
/usr/bin/python3 - "$dataset" <<'PY'
import os, random, sys
root = sys.argv[1]
r = random.Random(42)
total = 0
for split, count in (("train", 400), ("val", 80)):
    for i in range(count):
        cls = "n%08d" % (i % 8)
        d = os.path.join(root, split, cls)
        os.makedirs(d, exist_ok=True)
        size = r.choice((r.randint(20_000, 200_000), r.randint(200_000, 2_000_000)))
        with open(os.path.join(d, "img_%05d.jpg" % i), "wb") as f:
            f.write(r.randbytes(size))
        total += size
with open(os.path.join(root, "shard-000.tar"), "wb") as f:
    f.write(r.randbytes(64 << 20)); total += 64 << 20
print("generated %d files, %.1f MB" % (480 + 1, total / 1e6))
PY

uri="file://$dataset"
echo
echo "== larder store ls $uri"
"$larder" store ls "$uri"
echo
echo "== larder store stat $uri shard-000.tar"
"$larder" store stat "$uri" shard-000.tar
echo
echo "== larder store copy $uri $work/copy"
"$larder" store copy "$uri" "$work/copy"
echo
echo "== verifying the copy byte for byte (diff -r)"
diff -r "$dataset" "$work/copy" && echo "identical: $(find "$work/copy" -type f | wc -l) files"
