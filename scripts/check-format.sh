#!/usr/bin/env bash
# Fails if any tracked C++ file differs from clang-format's output (.clang-format: Google).
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.cc' '*.h')
[ -z "$files" ] && exit 0
if ! clang-format --dry-run --Werror $files; then
  echo "check-format: run 'clang-format -i' on the files above" >&2
  exit 1
fi
echo "check-format: $(echo "$files" | wc -w) files formatted"
