#!/usr/bin/python3
"""Hits per epoch of a dataset larger than the cache, LRU against the
epoch-pinned policy (`larder mount --eviction=epoch`), side by side in one
run on a real local cluster (a master, one worker with --ram_capacity, the
files in a local directory as under-store).

Each epoch reads every file once, in a new random order (a shuffling
sampler), through the Python client. A file is one block; its hit or miss
is read off the worker's counters (larder_worker_misses_total: blocks it
fetched from the under-store). LRU evicts, at every miss, the block read
longest ago, which in a shuffled epoch is as likely as any to be read next
and, in a sequential one, the very next; eviction=epoch keeps every block read
within its window (one hour by default), so the part of the dataset that fits
stays cached and hits every epoch.

  PYTHONPATH=build/python /usr/bin/python3 bench/eviction_bench.py \\
      [--ram_mib 512] [--ratio 1.2] [--file_kib 1024] [--epochs 5] \\
      [--order shuffled|sequential] [--dir /tmp/larder-evictbench]
"""
import argparse
import os
import random
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python", "tests"))
from cluster import Cluster  # noqa: E402


def make_files(data, count, size):
    os.makedirs(data, exist_ok=True)
    block = os.urandom(size)
    names = []
    for i in range(count):
        name = "f%06d.bin" % i
        path = os.path.join(data, name)
        if not (os.path.exists(path) and os.path.getsize(path) == size):
            with open(path, "wb") as f:
                f.write(b"%08d" % i + block[8:])
        names.append(name)
    return names


def epoch_hits(policy, data, names, file_bytes, ram_bytes, epochs, order, seed=3,
               window="1h"):
    """Hit ratio of each epoch (the first is cold) on a fresh cluster whose
    worker holds `ram_bytes`, with the files mounted under `policy`."""
    import larder
    flags = ["--eviction=" + policy] + (["--epoch_window=" + window]
                                        if policy == "epoch" else [])
    with Cluster(workers=1, allowed_root=data, ram="%dMiB" % (ram_bytes >> 20)) as c:
        c.mount("/ds", "file://" + data, *flags)
        client = larder.Client(c.master)
        paths = ["/ds/" + n for n in names]
        rng = random.Random(seed)
        rates = []
        for _ in range(epochs):
            if order == "shuffled":
                rng.shuffle(paths)
            before = c.metric("larder_worker_misses_total")
            for i in range(0, len(paths), 32):
                for got in client.read_many(paths[i:i + 32]):
                    assert len(got) == file_bytes
            misses = c.metric("larder_worker_misses_total") - before
            rates.append(1.0 - misses / len(paths))
        client.close()
        return rates


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ram_mib", type=int, default=512)
    ap.add_argument("--ratio", type=float, default=1.2,
                    help="dataset size / the worker's RAM")
    ap.add_argument("--file_kib", type=int, default=1024)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--order", default="shuffled", choices=["shuffled", "sequential"])
    ap.add_argument("--dir", default="/tmp/larder-evictbench")
    args = ap.parse_args()
    size = args.file_kib << 10
    count = int(args.ratio * (args.ram_mib << 20) / size)
    data = os.path.join(args.dir, "data")
    names = make_files(data, count, size)
    t = time.monotonic()
    rates = {p: epoch_hits(p, data, names, size, args.ram_mib << 20, args.epochs,
                           args.order) for p in ("lru", "epoch")}
    print("hits per epoch: %d files of %d KiB (%.2fx the worker's %d MiB of RAM), "
          "%s order, read through the Python client (%.0f s)"
          % (count, args.file_kib, count * size / (args.ram_mib << 20), args.ram_mib,
             args.order, time.monotonic() - t))
    print("%-6s %10s %16s" % ("epoch", "LRU", "eviction=epoch"))
    for e in range(args.epochs):
        print("%-6d %9.1f%% %15.1f%%" % (e + 1, 100 * rates["lru"][e],
                                          100 * rates["epoch"][e]))
    later = slice(1, None)
    print("%-6s %9.1f%% %15.1f%%" % (
        "2.." if args.epochs > 2 else "2", 100 * min(rates["lru"][later] or [0]),
        100 * min(rates["epoch"][later] or [0])) + "   (the worst epoch after the first)")
    shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
