#!/usr/bin/env bash
# Checks the code's thread-safety annotations (ABSL_GUARDED_BY,
# ABSL_EXCLUSIVE_LOCKS_REQUIRED, ...) with clang's -Wthread-safety analysis.
# GCC, which builds Larder, ignores them; this pass makes them mean something.
# It compiles every source file of the build (from compile_commands.json)
# with clang++ -fsyntax-only: no objects, a few minutes on two cores; a file
# whose inputs are unchanged since a clean check is not checked again (the
# cache is ~/.cache/larder/thread-safety; LARDER_THREAD_SAFETY_CACHE= turns it off).
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
import hashlib, json, os, shlex, subprocess, sys, tempfile
from concurrent.futures import ThreadPoolExecutor

db, jobs = sys.argv[1], int(sys.argv[2])
only = os.environ.get("LARDER_THREAD_SAFETY_ONLY", "")
root = os.getcwd()
# Results are kept like ccache's direct mode: a file's clean result is reused
# while the compiler, its arguments and the content of every file clang read
# for it (its own -MD list) are unchanged. Paths under the checkout are kept
# relative to it, so a fresh clone elsewhere reuses the working tree's results.
# LARDER_THREAD_SAFETY_CACHE= (empty) turns the cache off.
cache_dir = os.environ.get(
    "LARDER_THREAD_SAFETY_CACHE",
    os.path.join(os.environ.get("XDG_CACHE_HOME") or
                 os.path.expanduser("~/.cache"), "larder", "thread-safety"))
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

version = subprocess.run(["clang++", "--version"], capture_output=True,
                         text=True, check=True).stdout


def portable(text):
    return text.replace(root + "/", "@ROOT@/").replace(root, "@ROOT@")


def digest(path, memo={}):
    if path not in memo:
        try:
            with open(path, "rb") as f:
                memo[path] = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            memo[path] = "missing"
    return memo[path]


def manifest_path(src, directory, args):
    key = hashlib.sha256("\0".join(
        [version, portable(src), portable(directory)] +
        [portable(a) for a in args]).encode()).hexdigest()
    return os.path.join(cache_dir, key[:2], key)


def cached(manifest):
    try:
        with open(manifest) as f:
            deps = json.load(f)
    except (OSError, ValueError):
        return False
    return all(digest(p.replace("@ROOT@", root)) == h for p, h in deps.items())


def remember(manifest, depfile):
    with open(depfile) as f:
        text = f.read().replace("\\\n", " ")
    paths = shlex.split(text.split(":", 1)[1]) if ":" in text else []
    deps = {portable(os.path.realpath(p)): digest(os.path.realpath(p)) for p in paths}
    os.makedirs(os.path.dirname(manifest), exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(manifest),
                                     delete=False) as f:
        json.dump(deps, f)
    os.replace(f.name, manifest)


def check(unit):
    src, directory, args = unit
    manifest = manifest_path(src, directory, args) if cache_dir else None
    if manifest and cached(manifest):
        return src, 0, "", True
    fd, depfile = tempfile.mkstemp(suffix=".d")
    os.close(fd)
    try:
        cmd = ["clang++", "-fsyntax-only", "-Wno-everything", "-Wthread-safety",
               "-Werror=thread-safety", "-MD", "-MF", depfile] + \
              [a for a in args if not a.startswith("-W")]
        p = subprocess.run(cmd, cwd=directory, capture_output=True, text=True)
        # Only clean results are kept: a finding is reported every run.
        if p.returncode == 0 and manifest:
            remember(manifest, depfile)
        return src, p.returncode, p.stderr, False
    finally:
        os.unlink(depfile)


failed = hits = 0
with ThreadPoolExecutor(jobs) as pool:
    for src, rc, err, hit in pool.map(check, units):
        hits += hit
        if rc != 0:
            failed += 1
            sys.stderr.write(err)
print(f"check-thread-safety: {len(units)} files ({hits} unchanged since a clean "
      f"check), {failed} with findings")
sys.exit(1 if failed else 0)
PY
