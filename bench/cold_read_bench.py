#!/usr/bin/python3
"""Cold reads: the first epoch, when every byte comes from the object store,
through a front that behaves like a remote store (tests/servers/shaping_proxy.py:
--first_byte_ms before each response, --rate_mbps per connection and
direction) over s3rver processes that this script starts. Each Larder row
reads a data set that nothing has read before (every round seeds its own),
so what it measures is the path from the store. Prints one table.

Rows (--rows, in this order within each round):
  gets      plain GETs of whole files (anonymous: s3rver serves unsigned
            requests), one keep-alive connection per thread, with N in
            flight: a row per N of --parallel. The one with --readers in
            flight is what Larder's readers are compared with; the best is
            the front's ceiling in files/s.
  fuse      --readers threads read every file of a fresh set through
            `larder fuse` (open, read to the end, close) in a shuffled
            order; `walk`: the same in the order a listing gives (os.scandir
            of each directory), as a script that walks a tree reads.
  load      `larder load` of a fresh set (fetch every block into the
            cluster), files/s.
  random    a DataLoader (--loader_workers processes) over
            LarderMapDataset.from_prefix(fresh set) with a RandomSampler;
  prefetch  the same with PrefetchSampler(RandomSampler(...)).
  shard     one file of --shard_mib: one reader through `larder fuse`
            (4 MiB reads) against plain ranged GETs of 4 MiB with N in
            flight (the best is the front's ceiling in MB/s).
  trace     where a cold file's time goes (printed under the table, not a
            row of it): one reader opens, reads and closes --trace_files
            cold files one after another through `larder fuse` (medians of
            each step; the first stat of a directory, which lists it, is
            shown apart), next to one plain GET at a time of as many files;
            then --readers readers on a fresh set, with the worker's own
            time per under-store fetch (its histogram) beside the reads'.

For each row the front's counts per file: object GETs, HEADs and listings
(GETs of a bucket), so a request Larder adds shows; and the CPU per file of
the store (s3rver and the front), of Larder (master, worker, FUSE daemon)
and of the clients (the reader threads, `larder load`, the loaders).

  /usr/bin/python3 bench/cold_read_bench.py [--files 1000] [--file_kib 100]
      [--dirs 5] [--readers 8] [--parallel 8,32,128] [--shard_mib 1024]
      [--rounds 3] [--rows gets,fuse,walk,load,random,prefetch,shard]
      [--first_byte_ms 25] [--rate_mbps 80] [--s3rvers 1]
      [--loader_workers 4] [--batch 32] [--lookahead 0] [--worker_flags=...]
      [--fuse_flags=...] [--store_cpus 1 --node_cpus 0] [--trace_files 50]
      [--request_log FILE] [--keep]

--store_cpus and --node_cpus give the store (s3rver, the front) and everything
else (this script, its GET threads, the Larder cluster, the readers, the
loaders) cores of their own, as a remote store's would be: without them the
store's CPU (s3rver is one node process and costs about 1 ms of CPU per
100 KiB GET) and the node's compete for the same cores, and the path that
uses more CPU on the node side starves the store it reads from.

Needs root (FUSE), a build (scripts/build.sh: build/cli/larder
and build/python), node and tests/servers/node_modules
(scripts/install-deps.sh), and /usr/bin/python3 with torch for the loader
rows.
"""
import argparse
import concurrent.futures
import http.client
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import benchlib  # noqa: E402 (bench/, the script's own directory)
from benchlib import PYTHON, ROOT, ShapingProxy, diff, is_mounted  # noqa: E402

BUCKET = "cold"
# The worker's histogram of fetches from the under-store.
FETCH_SUM = "larder_worker_under_store_fetch_seconds_sum"
FETCH_COUNT = "larder_worker_under_store_fetch_seconds_count"
ROWS = ("gets", "fuse", "walk", "load", "random", "prefetch", "shard", "trace")

# A DataLoader epoch over a fresh set: argv = master, cluster path, sampler
# ("random" or "prefetch"), workers, batch, lookahead (0: the sampler's
# default). Prints samples, bytes and seconds.
LOADER = r"""
import sys, time, torch
import larder
from larder.torch import LarderMapDataset, PrefetchSampler
master, path, kind, workers, batch, lookahead = sys.argv[1:7]
client = larder.Client(master)
t = time.monotonic()
ds = LarderMapDataset.from_prefix(path, client=client)
listed = time.monotonic() - t
sampler = torch.utils.data.RandomSampler(ds)
if kind == "prefetch":
    kw = {"lookahead": int(lookahead)} if int(lookahead) else {}
    sampler = PrefetchSampler(sampler, ds, client=client, **kw)
dl = torch.utils.data.DataLoader(ds, batch_size=int(batch), sampler=sampler,
                                 num_workers=int(workers),
                                 collate_fn=lambda b: sum(len(s.data) for s in b))
n = nbytes = 0
for got in dl:
    nbytes += got
n = len(ds)
print(n, nbytes, time.monotonic() - t, listed)
"""


class Bench:
    def __init__(self, args, workdir):
        self.args = args
        self.workdir = workdir
        self.procs = benchlib.Procs()
        self.next_set = 0
        self.upstream = None  # HOST:PORT of the first s3rver, unshaped.
        self.proxy = None
        self.s3rver_pids = []
        self.cluster = None
        self.mnt = os.path.join(workdir, "mnt")
        self.file_bytes = args.file_kib << 10
        self.notes = []
        self.larder_pids = []
        # Tests build a Bench from a Namespace of their own (no --store_cpus).
        self.store_cpus = getattr(args, "store_cpus", "")

    def log(self, name):
        return os.path.join(self.workdir, "logs", name)

    # -- the store and its data --
    def start_store(self):
        addrs, self.s3rver_pids = benchlib.start_s3rvers(
            self.procs.spawn, os.path.join(self.workdir, "s3rver-data"),
            self.args.s3rvers, BUCKET, log=lambda i: self.log(f"s3rver{i}.log"),
            preexec_fn=benchlib.on_cpus(self.store_cpus))
        self.upstream = addrs[0]
        self.proxy = ShapingProxy(",".join(addrs), first_byte_ms=self.args.first_byte_ms,
                                  rate_mbps=self.args.rate_mbps,
                                  stats_file=os.path.join(self.workdir, "front.json"),
                                  python=PYTHON, stderr=open(self.log("front.log"), "ab"),
                                  preexec_fn=benchlib.on_cpus(self.store_cpus),
                                  request_log=getattr(self.args, "request_log", "") or None,
                                  later_page_ms=getattr(self.args, "later_page_ms", 0))
        self.proxy.start()
        self.procs.defer(self.proxy.stop)

    def put_all(self, items):
        """PUTs (key, bytes) straight to s3rver (no front), 8 at a time."""
        local = threading.local()
        host, port = self.upstream.split(":")

        def put(item):
            key, body = item
            c = getattr(local, "c", None)
            if c is None:
                c = local.c = http.client.HTTPConnection(host, int(port), timeout=300)
            c.request("PUT", f"/{BUCKET}/{key}", body=body,
                      headers={"Content-Length": str(len(body))})
            r = c.getresponse()
            r.read()
            if r.status != 200:
                raise RuntimeError(f"seeding {key}: {r.status}")

        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            list(ex.map(put, items))

    def new_set(self):
        """Seeds a data set nothing has read: --files files in --dirs
        directories (and a file of its own at its top: s3rver leaves a
        folder of only sub-folders out of a delimiter listing). Returns
        (name, [relative paths])."""
        name = f"set{self.next_set}"
        self.next_set += 1
        a = self.args
        paths = [f"{name}/d{i % a.dirs}/f{i:06d}.bin" for i in range(a.files)]
        seed = os.urandom(self.file_bytes + 4096)
        items = [(f"{name}/README", b"a cold data set\n")]
        for i, p in enumerate(paths):
            off = (i * 131) % 4096
            items.append((p, seed[off:off + self.file_bytes]))
        self.put_all(items)
        return name, paths

    # -- Larder --
    def start_larder(self):
        sys.path.insert(0, os.path.join(ROOT, "python", "tests"))
        from cluster import Cluster  # noqa: E402
        cli = os.environ.get("LARDER_CLI") or os.path.join(ROOT, "build", "cli", "larder")
        os.environ.update({"AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER",
                           "LARDER_CLI": cli})
        flags = tuple(f for f in self.args.worker_flags.split(",") if f)
        self.cluster = Cluster(workers=1, ram="8GiB", worker_flags=flags)
        self.procs.defer(self.cluster.stop)
        self.cluster.start()
        self.larder_pids = [self.cluster._master.proc.pid] + [
            w.proc.pid for w in self.cluster.workers]
        self.cluster.mount("/data", f"s3://{BUCKET}?endpoint={self.proxy.endpoint}"
                           "&region=us-east-1&path_style=true")
        os.makedirs(self.mnt)
        fuse_flags = [f for f in self.args.fuse_flags.split(",") if f]
        fuse = self.procs.spawn(
            [cli, "fuse", self.mnt, f"--master={self.cluster.master}",
             f"--log_file={self.log('fuse.log')}"] + fuse_flags,
            log=self.log("fuse.out"))

        def unmount():
            if is_mounted(self.mnt):
                if subprocess.call(["fusermount3", "-u", self.mnt],
                                   stderr=subprocess.DEVNULL) != 0:
                    subprocess.call(["umount", "-l", self.mnt])
            try:
                fuse.wait(10)
            except subprocess.TimeoutExpired:
                fuse.kill()
                fuse.wait()

        self.procs.defer(unmount)
        self.larder_pids.append(fuse.pid)
        deadline = time.monotonic() + 30
        while not os.path.isdir(os.path.join(self.mnt, "data")):
            if fuse.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"larder fuse did not mount; see {self.log('fuse.log')}")
            time.sleep(0.1)

    # -- measuring --
    def cpu(self):
        """CPU seconds so far of: the store (s3rver + front), Larder (master,
        workers, FUSE daemon), and this process with its children (the
        readers, `larder load`, the loaders)."""
        store = sum(benchlib.proc_cpu(p) for p in self.s3rver_pids)
        store += benchlib.proc_cpu(self.proxy.proc.pid)
        larder = sum(benchlib.proc_cpu(p) for p in self.larder_pids)
        t = os.times()
        return {"store": store, "larder": larder,
                "clients": t.user + t.system + t.children_user + t.children_system}

    def measure(self, fn):
        """Runs fn() -> (count, bytes, seconds) between two snapshots of the
        front's counters and the CPU; returns (count, bytes, seconds,
        counters, cpu)."""
        before, cpu = self.proxy.stats(), self.cpu()
        n, nbytes, seconds = fn()
        after, cpu_after = self.proxy.stats(), self.cpu()
        return (n, nbytes, seconds, diff(after, before),
                {k: cpu_after[k] - cpu[k] for k in cpu})

    def read_files(self, paths, threads):
        """Reads every path whole with `threads` threads; (files, bytes, s)."""
        total = [0]
        lock = threading.Lock()

        def one(p):
            n = read_whole(p, 1 << 20)
            with lock:
                total[0] += n

        t = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(threads) as ex:
            list(ex.map(one, paths))
        return len(paths), total[0], time.monotonic() - t

    def gets(self, keys, inflight, byte_range=None):
        """Plain GETs through the front, `inflight` at a time, each thread
        its own keep-alive connection; (requests, bytes, s)."""
        local = threading.local()
        port = self.proxy.port

        def get(item):
            key, rng = item
            c = getattr(local, "c", None)
            if c is None:
                c = local.c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            headers = {"Range": f"bytes={rng[0]}-{rng[1] - 1}"} if rng else {}
            c.request("GET", f"/{BUCKET}/{key}", headers=headers)
            r = c.getresponse()
            body = r.read()
            if r.status not in (200, 206):
                raise RuntimeError(f"GET {key}: {r.status}")
            return len(body)

        items = [(k, rng) for k, rng in keys] if byte_range else [(k, None) for k in keys]
        t = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(inflight) as ex:
            nbytes = sum(ex.map(get, items))
        return len(items), nbytes, time.monotonic() - t


def read_whole(path, chunk):
    """Reads `path` to its end in reads of `chunk` bytes; the bytes read."""
    n = 0
    buf = bytearray(chunk)
    with open(path, "rb", buffering=0) as f:
        while True:
            k = f.readinto(buf)
            if not k:
                return n
            n += k


def per_file(counters, n):
    by = counters.get("requests_by_method", {})
    g = counters.get("gets", {})
    return (g.get("object", 0) / n, by.get("HEAD", 0) / n, g.get("listing", 0) / n)


def run_round(b, rows, out):
    a = b.args
    rnd = {}

    if "gets" in rows or "fuse" in rows:
        # The plain GETs read a set of their own (they cache nothing).
        name, paths = b.new_set()
        for n in a.parallel:
            rnd[f"gets{n}"] = b.measure(lambda: b.gets(paths, n))
    for kind in ("fuse", "walk"):
        if kind not in rows:
            continue
        name, paths = b.new_set()
        files = [os.path.join(b.mnt, "data", p) for p in paths]
        if kind == "fuse":
            random.shuffle(files)
        else:
            files = []
            top = os.path.join(b.mnt, "data", name)
            for d in sorted(os.listdir(top)):
                dpath = os.path.join(top, d)
                if os.path.isdir(dpath):
                    files += [e.path for e in os.scandir(dpath)]
        # No drop_caches: the set is fresh, so nothing of it is in the
        # mount's page cache, and dropping the machine's caches would make
        # the store read from disk what the gets rows read from memory (one
        # pair on the 2-core VM: 81% of gets8 with the drop, 88% without).
        rnd[kind] = b.measure(lambda: b.read_files(files, a.readers))
    if "load" in rows:
        name, paths = b.new_set()

        def load():
            t = time.monotonic()
            b.cluster.run("load", f"/data/{name}")
            return len(paths) + 1, len(paths) * b.file_bytes, time.monotonic() - t

        fetching = b.cluster.metric(FETCH_SUM)
        rnd["load"] = b.measure(load)
        # The worker's fetch seconds over the load's: how many fetches it
        # kept in flight on average (its fetch threads are the most).
        in_flight = (b.cluster.metric(FETCH_SUM) - fetching) / rnd["load"][2]
        b.notes.append(f"load: the worker kept {in_flight:.1f} fetches in flight on average")
        # The same load again: nothing left to fetch, so what is left is
        # its fixed cost (the CLI, the job's listing through the front, the
        # owners' answers).
        t = time.monotonic()
        b.cluster.run("load", f"/data/{name}")
        b.notes.append(f"load again (all cached): {1e3 * (time.monotonic() - t):.0f} ms "
                       f"for {len(paths)} files")
    for kind in ("random", "prefetch"):
        if kind not in rows:
            continue
        name, paths = b.new_set()

        def loader():
            env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "build", "python"))
            r = subprocess.run([PYTHON, "-c", LOADER, b.cluster.master, f"/data/{name}",
                                kind, str(a.loader_workers), str(a.batch),
                                str(a.lookahead)],
                               capture_output=True, text=True, env=env, timeout=600)
            if r.returncode != 0:
                raise RuntimeError(f"loader {kind}: {r.stderr[-2000:]}")
            n, nbytes, seconds, listed = r.stdout.split()
            # The row's time is the dataset's listing and the epoch; the
            # note says what the listing took (once per job, not per epoch).
            epoch = float(seconds) - float(listed)
            b.notes.append(f"{kind}: listing the set {1e3 * float(listed):.0f} ms, "
                           f"then the epoch {int(n) / epoch:.1f} files/s")
            return int(n), int(nbytes), float(seconds)

        rnd[kind] = b.measure(loader)
    if "shard" in rows:
        # In a folder of its own: a lookup of a file lists its folder, and the
        # folder's listing would hide the sets seeded after it (trace, the next
        # round) until the mount's metadata TTL.
        key = f"shard{b.next_set}/shard.bin"
        b.next_set += 1
        size = a.shard_mib << 20
        chunk = os.urandom(8 << 20)
        b.put_all([(key, b"".join(chunk for _ in range(size // len(chunk))))])
        ranges = [(key, (o, min(size, o + (4 << 20)))) for o in range(0, size, 4 << 20)]
        for n in a.parallel:
            rnd[f"ranged{n}"] = b.measure(lambda: b.gets(ranges, n, byte_range=True))
        # Fresh too, and the ranged rows read it without the mount: no
        # drop_caches (see the fuse row).
        path = os.path.join(b.mnt, "data", key)

        def one_reader():
            t = time.monotonic()
            n = read_whole(path, 4 << 20)
            return 1, n, time.monotonic() - t

        rnd["shard"] = b.measure(one_reader)
    if "trace" in rows:
        trace(b)
    out.append(rnd)


def timed_read(path):
    """stat, open, read to the end and close `path`: each step's seconds."""
    t0 = time.monotonic()
    os.stat(path)
    t1 = time.monotonic()
    fd = os.open(path, os.O_RDONLY)
    t2 = time.monotonic()
    try:
        while os.read(fd, 1 << 20):
            pass
        t3 = time.monotonic()
    finally:
        os.close(fd)
    t4 = time.monotonic()
    return {"stat": t1 - t0, "open": t2 - t1, "read": t3 - t2, "close": t4 - t3}


def ms(xs):
    """The median of durations in seconds, in ms ("none" for none: with
    --dirs above --trace_files, every traced file is its directory's first)."""
    return f"{1e3 * statistics.median(xs):.2f} ms" if xs else "none"


def trace(b):
    """The `trace` row: notes on where a cold file's time goes."""
    a = b.args
    _, paths = b.new_set()
    gets = []
    conn = http.client.HTTPConnection("127.0.0.1", b.proxy.port, timeout=300)
    for key in paths[:a.trace_files]:  # One keep-alive connection, as Larder's.
        t = time.monotonic()
        conn.request("GET", f"/{BUCKET}/{key}")
        r = conn.getresponse()
        r.read()
        gets.append(time.monotonic() - t)
        if r.status != 200:
            raise RuntimeError(f"GET {key}: {r.status}")
    conn.close()
    _, paths = b.new_set()
    steps = {"stat": [], "open": [], "read": [], "close": []}
    first_stats = []
    seen = set()
    fetching = (b.cluster.metric(FETCH_SUM), b.cluster.metric(FETCH_COUNT))
    for rel in paths[:a.trace_files]:
        took = timed_read(os.path.join(b.mnt, "data", rel))
        d = os.path.dirname(rel)
        (first_stats if d not in seen else steps["stat"]).append(took["stat"])
        seen.add(d)
        for k in ("open", "read", "close"):
            steps[k].append(took[k])
    b.notes.append(
        f"trace, one reader, {a.trace_files} cold files: plain GET {ms(gets)}; "
        f"Larder stat {ms(steps['stat'])} (a directory's first: {ms(first_stats)}, "
        f"it lists the directory), open {ms(steps['open'])}, read {ms(steps['read'])}, "
        f"close {ms(steps['close'])}: Larder adds "
        f"{1e3 * (sum(statistics.median(v) for v in steps.values() if v) - statistics.median(gets)):.2f} ms; "
        f"the worker's fetch {fetch_ms(b, fetching)} (mean), "
        f"plain GET {1e3 * statistics.fmean(gets):.2f} ms (mean)")

    _, paths = b.new_set()
    random.shuffle(paths)
    fetching = (b.cluster.metric(FETCH_SUM), b.cluster.metric(FETCH_COUNT))
    lock = threading.Lock()
    reads = []
    parts = {"stat": [], "open": [], "read": [], "close": []}

    def one(rel):
        took = timed_read(os.path.join(b.mnt, "data", rel))
        with lock:
            reads.append(sum(took.values()))
            for k, x in took.items():
                parts[k].append(x)

    t = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(a.readers) as ex:
        list(ex.map(one, paths))
    seconds = time.monotonic() - t
    b.notes.append(
        f"trace, {a.readers} readers, {len(paths)} cold files: {len(paths) / seconds:.0f} files/s; "
        f"stat+open+read+close {ms(reads)} (median), {spread(reads)}; the worker's fetch "
        f"from the store {fetch_ms(b, fetching)} (mean); "
        + "; ".join(f"{k} {spread(v)}" for k, v in parts.items()))


def fetch_ms(b, before):
    """The worker's mean fetch from the store since `before` (the fetch
    histogram's sum and count then)."""
    n = b.cluster.metric(FETCH_COUNT) - before[1]
    return f"{1e3 * (b.cluster.metric(FETCH_SUM) - before[0]) / max(n, 1):.2f} ms of {n:.0f}"


def spread(xs):
    """mean / p90 / p99 / max of durations in seconds, in ms."""
    s = sorted(xs)

    def pick(q):
        return s[min(len(s) - 1, int(q * len(s)))]

    return (f"mean {1e3 * statistics.fmean(s):.2f} p90 {1e3 * pick(0.9):.2f} "
            f"p99 {1e3 * pick(0.99):.2f} max {1e3 * s[-1]:.2f} ms")


def print_table(b, rounds):
    a = b.args
    med = {}
    for key in rounds[0]:
        rs = [r[key] for r in rounds if key in r]
        med[key] = (statistics.median(x[0] / x[2] for x in rs),
                    statistics.median(x[1] / x[2] / 1e6 for x in rs), rs[0])
    gets = {k: v for k, v in med.items() if k.startswith("gets")}
    ceiling = max((v[0] for v in gets.values()), default=0)
    at_readers = med.get(f"gets{a.readers}", (0,))[0]
    ranged = {k: v for k, v in med.items() if k.startswith("ranged")}
    mb_ceiling = max((v[1] for v in ranged.values()), default=0)
    print()
    print(f"Cold reads through the front ({a.first_byte_ms:g} ms to the first byte, "
          f"{a.rate_mbps:g} MB/s per connection, {a.s3rvers} s3rver process(es)): "
          f"{a.files} files of {a.file_kib} KiB per set, {a.readers} readers, "
          f"median of {len(rounds)} round(s)"
          + (f"; store on cores {a.store_cpus}, the rest on {a.node_cpus or 'the others'}"
             if a.store_cpus else ""))
    print(f"{'ROW':<10} {'FILES/s':>9} {'MB/s':>8} {'VS':>22} {'GET/file':>9} "
          f"{'HEAD/file':>10} {'LIST/file':>10} {'CPU us/file: STORE':>19} "
          f"{'LARDER':>7} {'CLIENTS':>8}")
    for key, (fps, mbps, first) in med.items():
        n = first[0]
        g, h, lst = per_file(first[3], n)
        if key.startswith("gets"):
            vs = f"{fps / ceiling:.0%} of ceiling" if ceiling else ""
        elif key in ("fuse", "walk"):
            vs = f"{fps / at_readers:.0%} of gets{a.readers}" if at_readers else ""
        elif key.startswith("ranged"):
            vs = f"{mbps / mb_ceiling:.0%} of ceiling" if mb_ceiling else ""
        elif key == "shard":
            vs = f"{mbps / mb_ceiling:.0%} of MB/s ceiling" if mb_ceiling else ""
        else:
            vs = f"{fps / ceiling:.0%} of ceiling" if ceiling else ""
        cpu = first[4]
        print(f"{key:<10} {fps:9.1f} {mbps:8.1f} {vs:>22} {g:9.2f} {h:10.2f} {lst:10.2f} "
              f"{1e6 * cpu['store'] / n:19.0f} {1e6 * cpu['larder'] / n:7.0f} "
              f"{1e6 * cpu['clients'] / n:8.0f}")
    if ceiling:
        print(f"front's ceiling: {ceiling:.0f} files/s (best plain GETs row)"
              + (f", {mb_ceiling:.0f} MB/s (best ranged row)" if mb_ceiling else ""))
    for n in b.notes:
        print(n)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--file_kib", type=int, default=100)
    ap.add_argument("--dirs", type=int, default=5)
    ap.add_argument("--readers", type=int, default=8)
    ap.add_argument("--parallel", default="8,32,128")
    ap.add_argument("--shard_mib", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--first_byte_ms", type=float, default=25)
    ap.add_argument("--rate_mbps", type=float, default=80)
    ap.add_argument("--s3rvers", type=int, default=1)
    ap.add_argument("--loader_workers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lookahead", type=int, default=0,
                    help="PrefetchSampler's lookahead (0: its default)")
    ap.add_argument("--worker_flags", default="", help="comma-separated")
    ap.add_argument("--fuse_flags", default="", help="comma-separated")
    ap.add_argument("--store_cpus", default="",
                    help="cores for s3rver and the front, e.g. 1")
    ap.add_argument("--node_cpus", default="",
                    help="cores for everything else, e.g. 0")
    ap.add_argument("--trace_files", type=int, default=50,
                    help="the trace row's files read one at a time")
    ap.add_argument("--request_log", default="",
                    help="the front writes one line per request here: when it "
                         "came, the store's ms to its first byte, connection, "
                         "method, target, status (tests/servers/shaping_proxy.py)")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    args.parallel = [int(n) for n in args.parallel.split(",") if n]
    if args.readers not in args.parallel:
        args.parallel.insert(0, args.readers)
    rows = [r for r in args.rows.split(",") if r]
    for r in rows:
        if r not in ROWS:
            raise SystemExit(f"--rows: unknown {r}; known: {', '.join(ROWS)}")

    benchlib.unwind_on_signals()  # Through the finally below.
    if args.node_cpus:  # Inherited by every process started from here on.
        os.sched_setaffinity(0, benchlib.parse_cpus(args.node_cpus))
    workdir = tempfile.mkdtemp(prefix="larder-coldbench.")
    os.makedirs(os.path.join(workdir, "logs"))
    b = Bench(args, workdir)
    status = 0
    try:
        print(f"work directory {workdir}", file=sys.stderr)
        b.start_store()
        b.start_larder()
        rounds = []
        for i in range(args.rounds):
            print(f"round {i + 1}...", file=sys.stderr, flush=True)
            run_round(b, rows, rounds)
            for k, v in rounds[-1].items():
                print(f"  {k}: {v[0] / v[2]:.1f} files/s, {v[1] / v[2] / 1e6:.1f} MB/s",
                      file=sys.stderr, flush=True)
        print_table(b, rounds)
    except KeyboardInterrupt:
        print("interrupted: cleaning up", file=sys.stderr)
        status = 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        b.procs.cleanup()
        if args.keep:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
