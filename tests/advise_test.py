#!/usr/bin/python3
"""`larder advise` against measured epochs, at three cache sizes.

A real S3 (s3rver) behind the shaping front of tests/servers/ (25 ms to the
first byte, 80 MB/s per connection: a store slower than the cache, as a
remote one is), and for each of three worker RAM sizes (a quarter, half and
all of a 120 MiB dataset) a fresh master and worker with the dataset mounted
--eviction=epoch. `larder advise --epoch` measures the two rates on a sample,
reads the whole dataset once (which fills the cache); three more runs each
predict and measure an epoch, and the median epoch must be within 15% of the
median prediction, both from the hits the epochs had and from the cache's
size alone.

  /usr/bin/python3 -m pytest -q tests/advise_test.py
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))
from cluster import Cluster  # noqa: E402
from cold_read_bench import BUCKET, Bench  # noqa: E402

FILES = 480
FILE_KIB = 256
DATASET = FILES * FILE_KIB << 10


@pytest.fixture(scope="module")
def store():
    args = argparse.Namespace(files=FILES, file_kib=FILE_KIB, dirs=4, s3rvers=1,
                              first_byte_ms=25, rate_mbps=80)
    workdir = tempfile.mkdtemp(prefix="larder-advise.")
    os.makedirs(os.path.join(workdir, "logs"))
    b = Bench(args, workdir)
    try:
        b.start_store()
        name, _ = b.new_set()
        yield b, name
    finally:
        b.procs.cleanup()
        shutil.rmtree(workdir, ignore_errors=True)


def advise(cluster, path, *flags):
    r = cluster.run("advise", path, "--readers=16", "--output=json", *flags)
    return json.loads(r.stdout)


@pytest.mark.parametrize("share", [0.25, 0.5, 1.0])
def test_the_predicted_epoch_is_within_15_percent_of_the_measured_one(store, share):
    b, name = store
    os.environ.update({"AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER"})
    # A whole cache holds a little more than the dataset (its README).
    ram_mib = int(share * DATASET / (1 << 20)) + (1 if share == 1.0 else 0)
    with Cluster(workers=1, ram="%dMiB" % ram_mib) as c:
        c.mount("/data", "s3://%s?endpoint=%s&region=us-east-1&path_style=true"
                % (BUCKET, b.proxy.endpoint), "--eviction=epoch")
        path = "/data/" + name
        first = advise(c, path, "--epoch")  # An epoch fills the cache.
        assert first["files"] == FILES + 1
        # Three runs, each measuring its rates on a sample and then an epoch:
        # the median prediction against the median epoch (one run's store
        # rate moves by about 10% through the front on a loaded machine).
        docs = [advise(c, path, "--epoch") for _ in range(3)]
        for doc in docs:
            rates, epoch = doc["rates"], doc["epoch"]
            # The store is the slow one here: the model has something to say.
            assert rates["cache"] > 3 * rates["store"], rates
            # What an epoch-pinned cache of this size hits every epoch.
            assert abs(epoch["hit_fraction"] - min(1.0, share)) < 0.1, epoch
        for key in ("predicted_io_seconds", "predicted_io_seconds_at_cluster_cache"):
            # Each run's prediction against the epoch of the same run (its
            # rates were measured just before it), the median of the three:
            # within 15%, or 10 ms. An epoch served whole from the cache
            # takes 26-38 ms here, and one run in six took 61 ms (the
            # machine's noise, which the median keeps out). Until advise
            # kept its readers from one pass to the next, every pass over
            # the cached sample paid to start 16 threads (39 ms a pass, 14
            # with them kept) and an epoch paid it once; its first open of
            # the files the sample had not read cost 8 ms more: predictions
            # were 18-27 ms (+17% to +38%) over the whole-cache epoch, which
            # this floor catches.
            # Pairing the median prediction with the median epoch of other
            # runs failed a fresh-clone CI when one loaded run was 20% off
            # and the others within 2%.
            def error(d):
                return (d["epoch"][key] - d["epoch"]["seconds"]) / max(d["epoch"]["seconds"], 1e-9)
            median_run = sorted(docs, key=error)[1]
            err, run = error(median_run), median_run["epoch"]
            print("[advise] share %.2f: %s, median error %+.0f%% (measured %.3f s, predicted "
                  "%.3f s); runs %s"
                  % (share, key, 100 * err, run["seconds"], run[key],
                     [(round(d["epoch"]["seconds"], 3), round(d["epoch"][key], 3))
                      for d in docs]))
            assert abs(err) <= 0.15 or abs(run[key] - run["seconds"]) <= 0.010, (
                key, [d["epoch"] for d in docs])
        doc = docs[-1]
        # The table covers 0-100% of the dataset and the cluster's cache.
        assert [round(p["hit_fraction"], 2) for p in doc["predictions"]] == [
            0, 0.25, 0.5, 0.75, 1.0]
        assert doc["recommendation"]
        if share < 1:  # Larger than the cache, and its mount is epoch-pinned.
            assert "its mount keeps the part that fits" in doc["recommendation"]


def test_advise_names_what_it_cannot_measure(store):
    b, name = store
    with Cluster(workers=1, ram="256MiB") as c:
        c.mount("/data", "s3://%s?endpoint=%s&region=us-east-1&path_style=true"
                % (BUCKET, b.proxy.endpoint))
        r = c.run("advise", "/data/nothing-here", check=False)
        assert r.returncode == 3, r.stderr  # NotFound.
        r = c.run("advise", "/data/" + name, "--gpu_rate=fast", check=False)
        assert r.returncode == 2 and "is not a rate such as 800MB/s" in r.stderr
        # Cached and told not to evict: the store's rate is unknown.
        c.run("advise", "/data/" + name, "--sample_files=8")
        r = c.run("advise", "/data/" + name, "--sample_files=8", "--nomeasure_store",
                  check=False)
        assert r.returncode == 6 and "--store_rate" in r.stderr, r.stderr
        ok = c.run("advise", "/data/" + name, "--sample_files=8", "--nomeasure_store",
                   "--store_rate=50MB/s", "--samples_per_second=2000")
        assert "accelerators consume" in ok.stdout and "this cluster" in ok.stdout
