#!/usr/bin/env bash
# Checks the code's thread-safety annotations (ABSL_GUARDED_BY,
# ABSL_EXCLUSIVE_LOCKS_REQUIRED, ...) with clang's -Wthread-safety analysis.
# GCC, which builds Larder, ignores them; this pass makes them mean something.
# It compiles every source file of the build (from compile_commands.json)
# with clang++ -fsyntax-only: no objects, a few minutes on two cores.
#   scripts/check-thread-safety.sh [BUILD_DIR]
#   LARDER_THREAD_SAFETY_ONLY=client/ scripts/check-thread-safety.sh   # some files
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-${LARDER_BUILD_DIR:-build}}
jobs=${LARDER_JOBS:-2}
db="$build_dir/compile_commands.json"
if [ ! -f "$db" ]; then
  echo "check-thread-safety: $db missing (run scripts/build.sh first)" >&2
  exit 1
fi
exec /usr/bin/python3 - "$db" "$jobs" <<'PY'
import json, os, shlex, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

db, jobs = sys.argv[1], int(sys.argv[2])
only = os.environ.get("LARDER_THREAD_SAFETY_ONLY", "")
root = os.getcwd()
units = []
for entry in json.load(open(db)):
    src = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
    # Larder's own sources; generated protobuf code carries no annotations.
    if not src.startswith(root + "/") or "/gen/" in src or not src.endswith(".cc"):
        continue
    if only and only not in src:
        continue
    args = entry.get("arguments") or shlex.split(entry["command"])
    # Drop the launcher (ccache), the compiler and the output.
    while args and not args[0].endswith(("c++", "g++", "gcc", "cc")):
        args = args[1:]
    out, skip = [], False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a in ("-c",) or a.startswith("-fno-semantic-interposition"):
            continue
        out.append(a)
    units.append((src, entry["directory"], out))

def check(unit):
    src, directory, args = unit
    cmd = ["clang++", "-fsyntax-only", "-Wno-everything", "-Wthread-safety",
           "-Werror=thread-safety"] + [a for a in args if not a.startswith("-W")]
    p = subprocess.run(cmd, cwd=directory, capture_output=True, text=True)
    return src, p.returncode, p.stderr

failed = 0
with ThreadPoolExecutor(jobs) as pool:
    for src, rc, err in pool.map(check, units):
        if rc != 0:
            failed += 1
            sys.stderr.write(err)
print(f"check-thread-safety: {len(units)} files, {failed} with findings")
sys.exit(1 if failed else 0)
PY
