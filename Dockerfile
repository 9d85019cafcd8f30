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
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      fuse3 ca-certificates $(cat /tmp/runtime-packages) \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages
COPY --from=build /build/cli/larder /usr/local/bin/larder
# The master's state directory and the worker's socket directory (volumes in the chart).
RUN mkdir -p /var/lib/larder/master /run/larder
ENTRYPOINT ["larder"]
CMD ["--help"]
