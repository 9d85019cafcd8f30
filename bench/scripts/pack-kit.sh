#!/usr/bin/env bash
# Packs the benchmarks into one self-contained archive for a machine that has
# none of the build's dependencies (a larger node to measure on; nothing is
# fetched there):
#
#   bench/scripts/pack-kit.sh OUT.tar.xz
#
# The archive holds bin/ (larder and the FUSE benchmarks, without debug information; s3fs,
# fusermount and fusermount3 when installed; the node binary), lib/ (every shared library they link, except glibc's and the
# C++ runtime, which the other machine has), and node_modules/ (s3rver and
# what it requires, from tests/servers/node_modules). Unpack it with
# bench/scripts/run-kit.sh, which runs a benchmark with it. Needs a build
# (scripts/build.sh) and scripts/install-deps.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: bench/scripts/pack-kit.sh OUT.tar.xz}
build=${LARDER_BUILD_DIR:-build}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/node_modules"

bins=("$build/cli/larder" "$build/bench/small_files_bench"
      "$build/bench/fuse_read_bench")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "pack-kit: $b missing (scripts/build.sh)" >&2; exit 1; }
  # Symbols kept (not debug info): a profile taken there names functions.
  strip --strip-debug -o "$stage/bin/$(basename "$b")" "$b"
done
for tool in s3fs fusermount fusermount3 node; do
  p=$(command -v "$tool" || true)
  if [ -n "$p" ]; then cp -L "$p" "$stage/bin/"; bins+=("$p"); fi
done

# The libraries, less the ones every Linux machine has (glibc, the C++ and
# GCC runtimes): theirs must be used there, or the loader and libc disagree.
for b in "${bins[@]}"; do
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*|\
    libutil.so.*|libanl.so.*|libnsl.so.*|ld-linux*|libstdc++.so.*|libgcc_s.so.*)
      continue ;;
  esac
  cp -L "$lib" "$stage/lib/"
done

# s3rver and its dependencies (npm's flat layout: each a folder of its own).
node -e '
const path = require("path"), fs = require("fs");
const root = path.join(process.argv[1], "tests/servers/node_modules");
const seen = new Set();
(function walk(n) {
  if (seen.has(n)) return;
  seen.add(n);
  const p = JSON.parse(fs.readFileSync(path.join(root, n, "package.json")));
  Object.keys(p.dependencies || {}).forEach(walk);
})("s3rver");
console.log([...seen].join("\n"));' "$PWD" |
  while read -r m; do
    mkdir -p "$stage/node_modules/$(dirname "$m")"
    cp -a "tests/servers/node_modules/$m" "$stage/node_modules/$m"
  done

git rev-parse HEAD >"$stage/COMMIT" 2>/dev/null || true
tar -C "$stage" -cf - . | xz -T0 -6 >"$out"
echo "pack-kit: $out, $(du -h "$out" | cut -f1)"
