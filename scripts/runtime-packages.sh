#!/usr/bin/env bash
# The Debian packages that hold the shared libraries a binary loads (one per line, sorted),
# found with ldd and dpkg -S. The Dockerfile's runtime stage installs exactly these (and
# fuse3 for fusermount3); tests/chart/test_chart.py runs it on the built larder.
#   scripts/runtime-packages.sh build/cli/larder
set -euo pipefail
binary=${1:?usage: scripts/runtime-packages.sh BINARY}
missing=$(ldd "$binary" | awk '/not found/ {print $1}')
if [ -n "$missing" ]; then
  echo "runtime-packages: $binary needs libraries that are not installed: $missing" >&2
  exit 1
fi
mapfile -t libs < <(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
# /lib is a link to /usr/lib on Debian 12: dpkg knows one of each library's names. One dpkg
# call for all of them (each call reads dpkg's whole database: ~0.5 s).
names=()
for lib in "${libs[@]}"; do names+=("$lib" "$(readlink -f "$lib")" "/usr$lib"); done
found=$(dpkg -S "${names[@]}" 2>/dev/null || true)
for lib in "${libs[@]}"; do
  pkg=""
  for name in "$lib" "$(readlink -f "$lib")" "/usr$lib"; do
    pkg=$(awk -v p="$name" '{ n = index($0, ": "); if (substr($0, n + 2) == p) { print substr($0, 1, n - 1); exit } }' <<<"$found")
    [ -n "$pkg" ] && break
  done
  [ -n "$pkg" ] || { echo "runtime-packages: no package holds $lib" >&2; exit 1; }
  echo "$pkg"
done | cut -d: -f1 | sort -u
