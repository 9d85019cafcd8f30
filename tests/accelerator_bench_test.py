#!/usr/bin/python3
"""bench/accelerator_bench.py: the search finds the most accelerators at the
AU mark, the datasets have the workloads' shapes, and a short run of every
source (page cache, O_DIRECT disk, a real `larder fuse` mount and the Python
client on a real local cluster) feeds at least one emulated accelerator and
reads the bytes its samples say.

  PYTHONPATH=build/python /usr/bin/python3 -m pytest -q tests/accelerator_bench_test.py
"""
import json
import os
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(os.path.dirname(HERE), "bench")
sys.path.insert(0, BENCH)
import accelerator_bench as ab  # noqa: E402


def fake(capacity, calls):
    """A trial whose AU is 1 up to `capacity` accelerators, then falls."""
    def trial(n):
        calls.append(n)
        return {"accelerators": n, "au": 1.0 if n <= capacity else capacity / n}
    return trial


@pytest.mark.parametrize("capacity", [1, 2, 3, 5, 8, 13, 100, 255, 256])
def test_the_search_finds_the_most_accelerators_that_pass(capacity):
    calls = []
    n, best, runs = ab.search(fake(capacity, calls), 0.9, 256)
    # AU >= 0.9 holds up to capacity / 0.9 accelerators.
    want = min(256, int(capacity / 0.9))
    assert n == want
    assert best["accelerators"] == want and best["au"] >= 0.9
    assert len(calls) == len(set(calls))  # No count is run twice.
    assert len(calls) <= 2 * 9  # Doubling, then bisecting.
    assert [r["accelerators"] for r in runs] == sorted(calls)


def test_the_search_says_zero_when_one_accelerator_is_too_many():
    n, best, runs = ab.search(lambda k: {"accelerators": k, "au": 0.5}, 0.9, 64)
    assert (n, best) == (0, None)
    assert [r["accelerators"] for r in runs] == [1]


def test_datasets_have_the_workloads_shapes():
    resnet = ab.file_sizes(ab.WORKLOADS["resnet50"], 1 << 30)
    assert set(resnet) == {1251 * 114_660}
    assert len(resnet) == 8  # 1 GiB of 143 MB files.
    unet = ab.file_sizes(ab.WORKLOADS["unet3d"], 8 << 30)
    mean = sum(unet) / len(unet)
    assert 100e6 < mean < 200e6 and len(set(unet)) == len(unet)
    cosmo = ab.file_sizes(ab.WORKLOADS["cosmoflow"], 64 << 20)
    assert all(2_500_000 < s < 3_200_000 for s in cosmo)
    assert ab.file_sizes(ab.WORKLOADS["unet3d"], 1) == ab.file_sizes(
        ab.WORKLOADS["unet3d"], 1)  # Seeded: the same dataset every run.


def test_every_source_feeds_an_accelerator_and_reads_what_it_says():
    if os.geteuid() != 0:
        pytest.skip("needs root (FUSE)")
    workdir = tempfile.mkdtemp(prefix="larder-acctest.", dir="/var/tmp")
    try:
        r = subprocess.run(
            [sys.executable, os.path.join(BENCH, "accelerator_bench.py"),
             "--workloads=cosmoflow,resnet50", "--accelerator=a100",
             "--dataset_mib=200", "--run_seconds=1", "--max_accelerators=2",
             "--dir=" + workdir, "--output=json"],
            capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-4000:]
        out = json.loads(r.stdout)
        got = {(row["workload"], row["source"]): row for row in out["rows"]}
        assert set(got) == {(w, s) for w in ("cosmoflow", "resnet50")
                            for s in ab.SOURCES}
        for (w, s), row in got.items():
            assert row["runs"], (w, s)
            sample = ab.WORKLOADS[w].sample
            for run in row["runs"]:
                assert 0 < run["au"] <= 1.0, (w, s, run)
                # Every sample taken was read (file sizes vary around the
                # mean).
                assert run["bytes_read"] >= 0.9 * run["samples_taken"] * sample, (w, s)
                assert run["mb_per_s"] > 0 and run["samples_per_s"] > 0
            if row["best"] is not None:
                assert row["best"]["au"] >= row["mark"]
        # One A100 of ResNet-50 wants ~105 MB/s: the page cache and Larder
        # (warm) give it that on any machine; the disk may not.
        for s in ("page_cache", "fuse", "python"):
            assert got[("resnet50", s)]["accelerators"] >= 1, got[("resnet50", s)]["runs"]
        assert not os.path.ismount(os.path.join(workdir, "mnt"))
    finally:
        subprocess.run(["fusermount3", "-u", "-z", os.path.join(workdir, "mnt")],
                       stderr=subprocess.DEVNULL)
        subprocess.run(["rm", "-rf", workdir])
