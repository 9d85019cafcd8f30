#!/usr/bin/python3
"""A cold epoch through `larder fuse` over an S3 that behaves like a remote
one (tests/servers/shaping_proxy.py: 25 ms to the first byte, 80 MB/s per
connection) stays within the store's ceiling: every file costs the store one
GET and nothing else (no HEAD; a listing per directory at most), and 8
readers through Larder get at least 60% of what 8 plain GETs in flight get
from the same front in the same run. On a 2-core VM the 1,000-file epochs
of bench/cold_read_bench.py measure 75-94%, and this test's 240-file epoch
68-77% when it runs alone (each reader's first file waits for the listing of
its directory, which weighs more in a one-second epoch); the margin is for a
loaded machine, and the test runs alone (RUN_SERIAL): a neighbour that takes
a core between its two rates would fail it.

  /usr/bin/python3 -m pytest -q tests/cold_epoch_test.py   (as root: FUSE)

It uses the machinery of bench/cold_read_bench.py (a real s3rver, the
front, a master, a worker and a FUSE mount).
"""
import argparse
import os
import random
import shutil
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "bench"))
from cold_read_bench import Bench  # noqa: E402

FILES = 240
DIRS = 4
READERS = 8


def started_bench(prefix, **overrides):
    """A Bench (store, front, cluster, mount) with the given arguments;
    stopped and removed when the generator ends."""
    if os.geteuid() != 0:
        pytest.skip("needs root (FUSE)")
    fields = dict(
        files=FILES, file_kib=100, dirs=DIRS, readers=READERS, parallel=[READERS],
        shard_mib=0, rounds=1, first_byte_ms=25, rate_mbps=80, s3rvers=1,
        loader_workers=0, batch=0, lookahead=0, worker_flags="", fuse_flags="",
        keep=False)
    workdir = tempfile.mkdtemp(prefix=prefix)
    os.makedirs(os.path.join(workdir, "logs"))
    fields.update({k: v.replace("{workdir}", workdir) if isinstance(v, str) else v
                   for k, v in overrides.items()})
    b = Bench(argparse.Namespace(**fields), workdir)
    try:
        b.start_store()
        b.start_larder()
        yield b
    finally:
        b.procs.cleanup()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def bench():
    yield from started_bench("larder-coldtest.")


def test_a_cold_epoch_costs_one_get_per_file_and_keeps_up_with_plain_gets(bench):
    _, plain_paths = bench.new_set()
    n, _, plain_s, plain = bench.measure(lambda: bench.gets(plain_paths, READERS))[:4]
    assert n == FILES
    assert plain["gets"]["object"] == FILES

    name, paths = bench.new_set()
    files = [os.path.join(bench.mnt, "data", p) for p in paths]
    random.shuffle(files)
    # No drop_caches: the set is fresh (nothing of it in the mount's page
    # cache), and the plain GETs read theirs from the store's page cache too.
    n, nbytes, fuse_s, front, _ = bench.measure(lambda: bench.read_files(files, READERS))
    assert n == FILES
    assert nbytes == FILES * bench.file_bytes
    # The store's side: one GET per file, no HEAD, a listing per directory
    # (and the set's own and the mount's) at most.
    assert front["gets"]["object"] == FILES, front
    assert front["requests_by_method"].get("HEAD", 0) == 0, front
    assert front["gets"]["listing"] <= DIRS + 2, front
    # The rate: at least 60% of 8 plain GETs in flight.
    assert FILES / fuse_s >= 0.6 * FILES / plain_s, (
        f"Larder {FILES / fuse_s:.0f} files/s, plain GETs {FILES / plain_s:.0f}")

