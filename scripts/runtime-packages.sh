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
ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
  # /lib is a link to /usr/lib on Debian 12: dpkg knows one of the two names.
  dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null ||
    dpkg -S "/usr$lib" 2>/dev/null || { echo "runtime-packages: no package holds $lib" >&2; exit 1; }
done | cut -d: -f1 | sort -u
