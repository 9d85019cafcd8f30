#!/usr/bin/python3
"""The master's load from many processes on one node: N independent
processes (not forked from one another: each starts with an empty metadata
cache) each stat every one of the same F files once, on a real local cluster
(one master, one worker, a local directory as under-store). Prints the
master's Stat RPCs and all its RPCs for the run, against the ideal of one
Stat per file per node, the answers the node's metadata cache (the worker,
on the short-circuit socket) gave from memory, and the stats/s the
processes reached.

The target: 16 processes x 5,000 files -> at most 5,000 master Stats (one
metadata cache per node; 80,000 when each process had only its own).

  PYTHONPATH=build/python bench/metadata_fanout_bench.py [--files 5000]
      [--processes 1,4,16] [--dir /tmp/larder-fanout]
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python", "tests"))

from cluster import Cluster  # noqa: E402

CHILD = r"""
import sys, larder
master, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = larder.Client(master)
sys.stdout.write("ready\n"); sys.stdout.flush()
sys.stdin.readline()
for i in range(n):
    c.stat("%s/f%06d" % (prefix, i))
sys.stdout.write("done\n"); sys.stdout.flush()
"""


def run(cluster, prefix, files, processes):
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, cluster.master, prefix, str(files)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ))
             for _ in range(processes)]
    for p in procs:  # Connected (GetRing, GetMounts) before the count starts.
        assert p.stdout.readline().strip() == "ready"
    stat = 'larder_master_rpcs_total{method="Stat"}'
    node = 'larder_worker_metadata_requests_total{result="hit"}'
    before = (cluster.master_metric(stat), cluster.master_metric("larder_master_rpcs_total"),
              cluster.metric(node))
    t = time.monotonic()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        assert p.stdout.readline().strip() == "done"
        p.stdin.close()
        p.wait(60)
    elapsed = time.monotonic() - t
    after = (cluster.master_metric(stat), cluster.master_metric("larder_master_rpcs_total"),
             cluster.metric(node))
    return (after[0] - before[0], after[1] - before[1], after[2] - before[2],
            processes * files / elapsed)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--processes", default="1,4,16")
    ap.add_argument("--dir", default="/tmp/larder-fanout")
    args = ap.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    data = os.path.join(args.dir, "data")
    os.makedirs(data)
    for i in range(args.files):
        with open(os.path.join(data, "f%06d" % i), "wb") as f:
            f.write(b"x" * 100)
    rows = []
    with Cluster(workers=1, allowed_root=data) as c:
        for k, n in enumerate(int(x) for x in args.processes.split(",")):
            prefix = "/fan%d" % k  # A fresh mount: nothing cached anywhere.
            c.mount(prefix, "file://" + data)
            stats, total, node, rate = run(c, prefix, args.files, n)
            rows.append((n, stats, total, node, rate))
    shutil.rmtree(args.dir, ignore_errors=True)
    print("metadata_fanout_bench: %d files, each process stats every file once; %d CPUs"
          % (args.files, os.cpu_count()))
    print("%9s %14s %16s %12s %18s %14s" % ("PROCESSES", "MASTER STATS", "MASTER RPCS", "IDEAL",
                                             "NODE CACHE HITS", "STATS/S"))
    for n, stats, total, node, rate in rows:
        print("%9d %14d %16d %12d %18d %14.0f" % (n, stats, total, args.files, node, rate))


if __name__ == "__main__":
    main()
