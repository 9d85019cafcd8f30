#!/usr/bin/env bash
# Makes a fresh Debian 12 machine ready to build and test Larder:
#   1. Debian packages: compiler, CMake, every library Larder links, the tools the tests use.
#   2. The npm test servers (s3rver, azurite) at the versions pinned in
#      tests/servers/package-lock.json, installed into tests/servers/node_modules (git-ignored).
# Idempotent: when everything is present it only checks, in about a second.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git curl ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libjemalloc-dev libcurl4-openssl-dev libssl-dev prometheus-cpp-dev libxml2-dev
  libfuse3-dev fuse3 libxxhash-dev libgtest-dev libgmock-dev libbenchmark-dev
  libcivetweb-dev nlohmann-json3-dev python3 python3-botocore python3-torch s3fs clang-format clang
  openssl util-linux iproute2 jq etcd-server etcd-client
  pybind11-dev python3-pybind11 python3-dev python3-numpy python3-fsspec python3-pytest
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm: Debian's packages, unless some Node.js (which may bundle npm) is already there.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: Debian packages present"
fi

# Test servers, pinned by the committed lockfile. Reinstalled only when the lockfile changed.
stamp=tests/servers/node_modules/.larder-lock-stamp
if [ ! -f "$stamp" ] || ! cmp -s tests/servers/package-lock.json "$stamp"; then
  echo "install-deps: installing npm test servers (s3rver, azurite) with npm ci"
  (cd tests/servers && npm ci --no-audit --no-fund --loglevel=error)
  cp tests/servers/package-lock.json "$stamp"
else
  echo "install-deps: npm test servers present"
fi
