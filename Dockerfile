# The Larder image: the `larder` binary (master, worker, fuse and the CLI), the shared
# libraries it loads and fusermount3, on Debian 12. Built with the repository's own scripts,
# the same commands README's "Building by hand" and CI run (scripts/install-deps.sh,
# scripts/build.sh, scripts/runtime-packages.sh).
#
#   docker build -t larder:0.1.0 .
#
# No container engine runs on the development machines, so CI does not build this file; it
# runs its steps: the scripts, and scripts/runtime-packages.sh on the built binary
# (tests/chart/test_chart.py).

FROM debian:12 AS build
WORKDIR /src
COPY . .
# Debian packages only (the npm test servers and helm are for tests, not the image).
RUN LARDER_SKIP_TEST_TOOLS=1 scripts/install-deps.sh \
 && LARDER_BUILD_DIR=/build scripts/build.sh \
      -DLARDER_BUILD_TESTS=OFF -DLARDER_BUILD_BENCH=OFF \
 && scripts/runtime-packages.sh /build/cli/larder > /build/runtime-packages

FROM debian:12-slim
COPY --from=build /build/runtime-packages /tmp/runtime-packages
# fuse3: fusermount3 (the FUSE pod's preStop). openssl and curl: the chart's certificate Job
# (charts/larder/files/certs.sh) makes certificates and stores them through the Kubernetes API.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      fuse3 ca-certificates openssl curl $(cat /tmp/runtime-packages) \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages
COPY --from=build /build/cli/larder /usr/local/bin/larder
# A user without privilege, the image's default: the master, the `larder` CLI, the chart's
# mounts and certificate Jobs run as it (uid and gid 65532, numeric below so that Kubernetes'
# runAsNonRoot can check it). The chart runs two pods as root (runAsUser: 0), each for a
# reason: the FUSE daemon mounts (CAP_SYS_ADMIN and /dev/fuse, in a privileged container for
# Bidirectional mount propagation), and the worker must own its cache directories and the
# short-circuit socket's on the host, which the kubelet creates as root (it runs with no
# capability). The master's state directory and the worker's socket directory are volumes in
# the chart.
RUN groupadd --system --gid 65532 larder \
 && useradd --system --uid 65532 --gid 65532 --home-dir /var/lib/larder --no-create-home \
      --shell /usr/sbin/nologin larder \
 && mkdir -p /var/lib/larder/master /run/larder \
 && chown -R 65532:65532 /var/lib/larder
USER 65532:65532
ENTRYPOINT ["larder"]
CMD ["--help"]
