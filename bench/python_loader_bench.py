#!/usr/bin/python3
"""The Python client against a local directory and the FUSE mount, side by
side in one run on a real local cluster (one master, two workers, the data in
a local directory as under-store). Prints one table.

  rows 1-3  N x SIZE files, the same Dataset code, DataLoader(num_workers=W,
            batch_size=64, persistent workers): files in the page cache
            (open/read), the FUSE mount (open/read), and LarderMapDataset
            (the client), warm; one epoch of each per round, interleaved, the
            median of R rounds after a warm-up round.
  rows 4-5  a 1 GiB shard read into one reused buffer with readinto():
            from the page cache, and through the client (warm).
  rows 6-7  a cold epoch (page cache dropped, a fresh mount): LarderMapDataset
            with a RandomSampler, and with PrefetchSampler around it.
  rows 8-9  PyTorch's default DataLoader (persistent_workers=False: new worker
            processes every epoch), warm, in the same interleaved rounds as
            rows 1-3: LarderMapDataset.from_prefix (reads as its listing said),
            and the same files as a dataset of bare paths (each read looks its
            file up); with the master's RPCs per epoch (larder_master_rpcs_total,
            all methods, and Stat alone) and the rate against row 3.
  row 10    the page cache's Dataset with the default DataLoader: what new
            worker processes every epoch cost by themselves (against row 1).

  PYTHONPATH=build/python bench/python_loader_bench.py [--files 5000] [--size 102400]
      [--workers 4] [--rounds 5] [--shard_mib 1024] [--dir /tmp/larder-pybench]
      [--fuse_flags=--flag=value,...] [--fuse_only]

  --fuse_only: rows 1-2 alone, without the larder module (for a machine whose
  Python is not the one the module was built for).
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python", "tests"))

from torch.utils.data import DataLoader, Dataset, RandomSampler  # noqa: E402

from cluster import Cluster, free_port  # noqa: E402

try:
    import larder
    from larder.torch import LarderMapDataset, PrefetchSampler
except ImportError as e:  # --fuse_only needs neither (another Python than the build's).
    larder, LARDER_IMPORT_ERROR = None, e


class FileDataset(Dataset):
    """The reference: plain open/read of files in a directory."""

    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            return len(f.read())


def length(sample):
    return len(sample.data)


def drop_page_cache():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def fuse_ops(port):
    """The FUSE daemon's requests so far, by operation."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    out = {}
    for m in re.finditer(r'^larder_fuse_operations_total\{[^}]*op="([a-z_]+)"[^}]*\} (\S+)$',
                         text, re.M):
        out[m.group(1)] = out.get(m.group(1), 0) + float(m.group(2))
    return out


def make_loader(ds, workers, sampler=None, persistent=True):
    return DataLoader(ds, batch_size=64, num_workers=workers, sampler=sampler,
                      persistent_workers=persistent and workers > 0)


def epoch_rate(loader):
    """One epoch: samples/s, and the bytes read (a check)."""
    n, total = 0, 0
    t = time.monotonic()
    for batch in loader:
        n += len(batch)
        total += int(sum(batch))
    return n / (time.monotonic() - t), total


def cold_rate(ds, workers, sampler):
    """One epoch with new (not persistent) workers."""
    return epoch_rate(make_loader(ds, workers, sampler=sampler, persistent=False))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--size", type=int, default=100 << 10)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shard_mib", type=int, default=1024)
    ap.add_argument("--dir", default="/tmp/larder-pybench")
    ap.add_argument("--fuse_flags", default="",
                    help="extra `larder fuse` flags, comma-separated")
    ap.add_argument("--fuse_only", action="store_true",
                    help="the page cache and FUSE rows alone; no larder module needed")
    args = ap.parse_args()
    if larder is None and not args.fuse_only:
        sys.exit("python_loader_bench: cannot import larder (%s): set PYTHONPATH=build/python, "
                 "or pass --fuse_only" % LARDER_IMPORT_ERROR)

    shutil.rmtree(args.dir, ignore_errors=True)
    data = os.path.join(args.dir, "data")
    for i in range(args.files):
        d = os.path.join(data, "small", "c%02d" % (i % 50))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "%06d.jpg" % i), "wb") as f:
            f.write(os.urandom(args.size))
    shard = os.path.join(data, "shard.tar")
    with open(shard, "wb") as f:
        for _ in range(args.shard_mib):
            f.write(os.urandom(1 << 20))
    paths = sorted(os.path.join(dp, n) for dp, _, ns in os.walk(os.path.join(data, "small"))
                   for n in ns)
    rows = []
    measure(args, data, shard, paths, rows)
    print_table(args, rows)


def measure(args, data, shard, paths, rows):
    """Appends the table's rows (a cluster of its own, stopped on return)."""
    ram = "%dMiB" % (args.files * args.size * 2 // (1 << 20) + args.shard_mib + 512)
    with Cluster(workers=2, allowed_root=data, ram=ram) as c:
        c.mount("/b", "file://" + data)
        client = None if args.fuse_only else larder.Client(c.master)

        # 1-3. The same DataLoader settings over the page cache, the FUSE
        # mount and the client, warm, with persistent workers: one warm-up
        # epoch each, then `rounds` rounds of one epoch of each, interleaved
        # so that a noisy neighbour hits all three alike; the median epoch.
        for p in paths:  # Warm the page cache with one pass.
            with open(p, "rb") as f:
                f.read()
        mnt = os.path.join(args.dir, "mnt")
        os.makedirs(mnt, exist_ok=True)
        env = dict(os.environ, LARDER_MASTER=c.master)
        fuse_metrics = free_port()
        fuse = subprocess.Popen([c.cli, "fuse", mnt,
                                 "--fuse_metrics_listen=127.0.0.1:%d" % fuse_metrics]
                                + [f for f in args.fuse_flags.split(",") if f],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while not os.path.ismount(mnt) and time.monotonic() < deadline:
                time.sleep(0.05)
            fpaths = [os.path.join(mnt, "b", os.path.relpath(p, data)) for p in paths]
            loaders = [make_loader(FileDataset(paths), args.workers),
                       make_loader(FileDataset(fpaths), args.workers)]
            if not args.fuse_only:
                ds = LarderMapDataset.from_prefix("/b/small", transform=length, client=client)
                assert len(ds) == args.files
                by_path = LarderMapDataset(ds.paths, ds.sizes, transform=length, client=client)
                loaders += [make_loader(ds, args.workers),
                            make_loader(ds, args.workers, persistent=False),
                            make_loader(by_path, args.workers, persistent=False),
                            make_loader(FileDataset(paths), args.workers, persistent=False)]
            rates = [[] for _ in loaders]
            fuse_requests = {}  # op -> requests per file, each warm FUSE epoch
            rpcs = [[] for _ in loaders]
            stats = [[] for _ in loaders]
            all_rpcs = "larder_master_rpcs_total"
            stat_rpcs = 'larder_master_rpcs_total{method="Stat"}'
            want = None
            for r in range(args.rounds + 1):
                for k, loader in enumerate(loaders):
                    before, stat_before = c.master_metric(all_rpcs), c.master_metric(stat_rpcs)
                    ops_before = fuse_ops(fuse_metrics) if k == 1 else None
                    rate, total = epoch_rate(loader)
                    if k == 1 and r > 0:
                        ops = fuse_ops(fuse_metrics)
                        for op, n in ops.items():
                            fuse_requests.setdefault(op, []).append(
                                (n - ops_before.get(op, 0)) / len(fpaths))
                    assert want is None or total == want, (k, total, want)
                    want = total
                    if r > 0:  # Round 0 warms up.
                        rates[k].append(rate)
                        rpcs[k].append(c.master_metric(all_rpcs) - before)
                        stats[k].append(c.master_metric(stat_rpcs) - stat_before)
            medians = [statistics.median(x) for x in rates]
            local, fz = medians[:2]
            del loaders
        finally:
            fuse.terminate()
            fuse.wait(30)
            subprocess.run(["fusermount3", "-u", "-z", mnt], stderr=subprocess.DEVNULL)
        rows.append(("local dir, page cache (open/read)", "%.0f samples/s" % local, "1.00"))
        per_file = ", ".join("%s %.2f" % (op, statistics.median(v))
                             for op, v in sorted(fuse_requests.items())
                             if statistics.median(v) >= 0.005)
        rows.append(("FUSE mount (open/read)", "%.0f samples/s" % fz,
                     "%.2f; FUSE requests per file: %s" % (fz / local, per_file or "none")))
        if args.fuse_only:
            return
        lar, fresh, fresh_paths, fresh_local = medians[2:]
        rows.append(("larder.torch LarderMapDataset", "%.0f samples/s" % lar,
                     "%.2f (%.2fx FUSE)" % (lar / local, lar / fz)))
        late_rows = [
            ("default DataLoader, from_prefix", fresh, rpcs[3], stats[3]),
            ("default DataLoader, bare paths", fresh_paths, rpcs[4], stats[4])]

        # 4-5. 1 GiB with readinto into one reused buffer.
        buf = bytearray(8 << 20)
        with open(shard, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass
        best_pc = 0.0
        for _ in range(3):
            t = time.monotonic()
            with open(shard, "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass
            best_pc = max(best_pc, (args.shard_mib << 20) / (time.monotonic() - t) / 1e9)
        best_l = 0.0
        client.read_many(["/b/shard.tar"])  # Warm.
        for _ in range(3):
            t = time.monotonic()
            with client.open("/b/shard.tar") as f:
                while f.readinto(buf):
                    pass
            best_l = max(best_l, (args.shard_mib << 20) / (time.monotonic() - t) / 1e9)
        rows.append(("1 GiB readinto, page cache", "%.2f GB/s" % best_pc, "1.00"))
        rows.append(("1 GiB readinto, larder client", "%.2f GB/s" % best_l,
                     "%.2f" % (best_l / best_pc)))

        # 6-7. Cold epochs: a fresh mount each, page cache dropped.
        for name, prefetch in (("cold epoch, RandomSampler", False),
                               ("cold epoch, PrefetchSampler", True)):
            mount = "/cold%d" % prefetch
            c.mount(mount, "file://" + data)
            drop_page_cache()
            cds = LarderMapDataset.from_prefix(mount + "/small", transform=length,
                                               client=client)
            sampler = RandomSampler(cds)
            if prefetch:
                sampler = PrefetchSampler(sampler, cds, lookahead=1024)
            hits = c.metric("larder_worker_hits_total")
            rate, got = cold_rate(cds, args.workers, sampler)
            assert got == want
            misses = args.files - int(c.metric("larder_worker_hits_total") - hits)
            rows.append((name, "%.0f samples/s" % rate, "%d of %d reads missed" % (misses,
                                                                                 args.files)))

        for name, rate, all_n, stat_n in late_rows:
            rows.append((name, "%.0f samples/s" % rate,
                         "%.2f; %.2f of persistent; master RPCs/epoch %d (Stat %d)"
                         % (rate / local, rate / lar, statistics.median(all_n),
                            statistics.median(stat_n))))
        # What starting new worker processes every epoch costs by itself.
        rows.append(("default DataLoader, page cache", "%.0f samples/s" % fresh_local,
                     "%.2f: new worker processes every epoch, no Larder"
                     % (fresh_local / local)))


def print_table(args, rows):
    shutil.rmtree(args.dir, ignore_errors=True)
    print("python_loader_bench: %d x %d KiB files, DataLoader(num_workers=%d, batch_size=64), "
          "median of %d epochs; %d CPUs" % (args.files, args.size >> 10, args.workers, args.rounds,
                                  os.cpu_count()))
    print("%-36s %18s  %s" % ("READ", "RATE", "VS PAGE CACHE"))
    for r in rows:
        print("%-36s %18s  %s" % r)


if __name__ == "__main__":
    main()
