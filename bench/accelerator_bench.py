#!/usr/bin/python3
"""How many accelerators does this node feed? MLPerf Storage's question,
asked the way its harness (DLIO) asks it, of the page cache, the local disk,
Larder's FUSE mount and Larder's Python client, side by side in one run.

Each emulated accelerator is a process. Per step it takes a batch of samples
from its readers (threads that read the dataset's files ahead of it, as a
DataLoader's workers do), "computes" by sleeping the time a real accelerator
spends on that batch, and waits at a barrier with the others (one per step,
as DLIO's ranks do). Its accelerator utilisation (AU) is compute time over
wall time after the first step; a run passes when the mean AU over the
accelerators reaches the workload's mark (90%, CosmoFlow 70%). For every
source the benchmark looks for the most accelerators that pass: it doubles
the count while runs pass, then bisects between the last pass and the first
failure.

  workload   sample (mean, sd)        file            batch  readers  reads
  resnet50   114,660 B                1,251 samples   400    8        each file front to back, 256 KiB
  unet3d     146.6 MB (68.3 MB)       1 sample        7      4        whole files, seeded random order
  cosmoflow  2.83 MB (71 KB)          1 sample        1      4        whole files, random order

Compute time per batch (MLPerf Storage v1.0): H100 0.224 / 0.323 / 0.00351 s,
A100 0.435 / 0.636 / 0.00551 s; --compute_s gives any other.

Sources:
  page cache  the dataset's files in a local directory, read once first
  disk        the same files with O_DIRECT (the device, not the page cache)
  fuse        `larder fuse` over a local cluster whose under-store is that
              directory (file://), warm (read once first)
  python      larder.Client().open() on that cluster, warm

The cluster (a master and one worker, as on a node) and the mount are
started here; the datasets are generated (--dataset_mib per workload; file
sizes follow the table, the count is scaled). Prints a table, or JSON with
--output=json (every run of the search included).

  PYTHONPATH=build/python /usr/bin/python3 bench/accelerator_bench.py \\
      [--workloads resnet50,unet3d,cosmoflow] [--accelerator h100|a100] \\
      [--sources page_cache,disk,fuse,python] [--dataset_mib 2048] \\
      [--run_seconds 6] [--max_accelerators 256] [--dir /tmp/larder-accbench] \\
      [--output table|json]
"""
import argparse
import json
import mmap
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python", "tests"))
import benchlib  # noqa: E402
from cluster import Cluster, free_port  # noqa: E402


class Workload:
    def __init__(self, name, sample, sample_sd, per_file, batch, readers, chunk,
                 compute, au):
        self.name, self.sample, self.sample_sd = name, sample, sample_sd
        self.per_file, self.batch, self.readers = per_file, batch, readers
        self.chunk, self.compute, self.au = chunk, compute, au


WORKLOADS = {
    w.name: w for w in [
        Workload("resnet50", 114_660, 0, 1251, 400, 8, 256 << 10,
                 {"h100": 0.224, "a100": 0.435}, 0.90),
        Workload("unet3d", 146_600_628, 68_341_808, 1, 7, 4, 4 << 20,
                 {"h100": 0.323, "a100": 0.636}, 0.90),
        Workload("cosmoflow", 2_828_486, 71_311, 1, 1, 4, 4 << 20,
                 {"h100": 0.00351, "a100": 0.00551}, 0.70),
    ]
}

SOURCES = ["page_cache", "disk", "fuse", "python"]
LABELS = {"page_cache": "page cache", "disk": "local disk (O_DIRECT)",
          "fuse": "Larder FUSE", "python": "Larder Python client"}


def file_sizes(w, dataset_bytes, seed=1):
    """Sizes of the workload's files: samples of the table's mean and spread
    (at least 4 KiB each), enough files for `dataset_bytes` (at least 2)."""
    rng = random.Random(seed)
    sizes, total = [], 0
    while total < dataset_bytes or len(sizes) < 2:
        if w.per_file > 1:
            size = w.per_file * w.sample
        else:
            size = max(4096, int(rng.gauss(w.sample, w.sample_sd)))
        sizes.append(size)
        total += size
    return sizes


def generate(directory, w, dataset_bytes):
    """Writes the dataset under directory/NAME (kept between runs when the
    sizes match); returns the file names relative to `directory`."""
    sizes = file_sizes(w, dataset_bytes)
    names = []
    block = os.urandom(1 << 20)
    d = os.path.join(directory, w.name)
    os.makedirs(d, exist_ok=True)
    for i, size in enumerate(sizes):
        name = os.path.join(w.name, "%s_%05d.%s" % (
            w.name, i, "tfrecord" if w.name != "unet3d" else "npz"))
        path = os.path.join(directory, name)
        names.append(name)
        if os.path.exists(path) and os.path.getsize(path) == size:
            continue
        with open(path, "wb") as f:
            f.write(b"%08d" % i)  # No two files alike.
            left = size - 8
            while left > 0:
                n = min(left, len(block))
                f.write(block[:n])
                left -= n
    return names


class Samples:
    """The samples readers have read and the accelerator has not taken yet
    (a count: the bytes are not kept), bounded like a DataLoader's prefetch
    (two batches)."""

    def __init__(self, capacity):
        self.cv = threading.Condition()
        self.capacity = capacity
        self.count = 0
        self.error = None
        self.closed = False

    def put(self, n):
        with self.cv:
            while self.count >= self.capacity and not self.closed:
                self.cv.wait()
            self.count += n
            self.cv.notify_all()
        return not self.closed

    def take(self, n, timeout):
        deadline = time.monotonic() + timeout
        with self.cv:
            while self.count < n and self.error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no batch in %.0f s" % timeout)
                self.cv.wait(left)
            if self.error is not None:
                raise RuntimeError(self.error)
            self.count -= n
            self.cv.notify_all()

    def fail(self, error):
        with self.cv:
            self.error = error
            self.cv.notify_all()

    def close(self):
        with self.cv:
            self.closed = True
            self.cv.notify_all()


def make_reader(source, client):
    """read(path, buf, on_bytes): reads the file through `source` in reads
    of len(buf), calling on_bytes(n) after each."""
    if source in ("page_cache", "fuse"):
        def read(path, buf, on_bytes):
            with open(path, "rb", buffering=0) as f:
                while True:
                    n = f.readinto(buf)
                    if not n:
                        return
                    on_bytes(n)
    elif source == "disk":
        def read(path, buf, on_bytes):
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
            try:
                while True:
                    n = os.readv(fd, [buf])  # buf: an mmap, page-aligned.
                    if not n:
                        return
                    on_bytes(n)
            finally:
                os.close(fd)
    elif source == "python":
        def read(path, buf, on_bytes):
            with client.open(path) as f:
                while True:
                    n = f.readinto(buf)
                    if not n:
                        return
                    on_bytes(n)
    else:
        raise ValueError(source)
    return read


def accelerator(rank, w, compute, paths, source, master, steps, barrier, stop,
                results, timeout):
    """One emulated accelerator (a process of its own)."""
    client = None
    if source == "python":
        import larder
        client = larder.Client(master)
    read = make_reader(source, client)
    samples = Samples(2 * w.batch)
    order = list(paths)
    random.Random(rank).shuffle(order)  # Seeded, a different order a rank.
    next_file = [0]
    lock = threading.Lock()
    got = [0]  # Bytes read.

    def reader():
        buf = mmap.mmap(-1, w.chunk)
        try:
            while not samples.closed:
                with lock:
                    path = order[next_file[0] % len(order)]
                    next_file[0] += 1
                if w.per_file == 1:
                    def on_bytes(n):
                        got[0] += n
                    read(path, buf, on_bytes)
                    if not samples.put(1):
                        return
                else:
                    # Records of a TFRecord file become samples as their
                    # bytes arrive.
                    state = {"pending": 0}

                    def on_bytes(n, state=state):
                        got[0] += n
                        state["pending"] += n
                        whole = state["pending"] // w.sample
                        if whole:
                            state["pending"] -= whole * w.sample
                            samples.put(whole)
                    read(path, buf, on_bytes)
        except Exception as e:  # noqa: BLE001
            samples.fail("%s: %s" % (type(e).__name__, e))

    threads = [threading.Thread(target=reader, daemon=True) for _ in range(w.readers)]
    try:
        barrier.wait(timeout)
        for t in threads:
            t.start()
        start = first = None
        taken = 0
        done = 0
        for step in range(steps):
            if step == 0:
                start = time.monotonic()
            samples.take(w.batch, timeout)
            taken += w.batch
            time.sleep(compute)
            barrier.wait(timeout)
            done += 1
            if step == 0:
                first = time.monotonic()
                bytes_at_first = got[0]
            if stop.value:  # Set at a barrier: every rank sees it alike.
                break
        end = time.monotonic()
        wall = end - first
        results.put({"rank": rank, "au": compute * (done - 1) / wall if wall > 0 else 0.0,
                     "samples": (done - 1) * w.batch, "seconds": wall,
                     "bytes": got[0] - bytes_at_first, "error": None,
                     "startup": first - start, "taken": taken, "read": got[0]})
    except Exception as e:  # noqa: BLE001
        barrier.abort()
        results.put({"rank": rank, "error": "%s: %s" % (type(e).__name__, e)})
    finally:
        samples.close()


def run(n, w, compute, paths, source, master, run_seconds, timeout):
    """`n` accelerators for about `run_seconds` of compute each (a run that
    falls far behind stops after 3x that, with the steps it made): the mean
    AU, samples/s and MB/s of the node (after each one's first step)."""
    steps = max(4, int(run_seconds / compute) + 1)
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Value("b", 0)
    crossings = ctx.Value("q", 0)
    until = ctx.Value("d", 0.0)

    def at_barrier():  # Run by the last rank to arrive, before any leaves.
        crossings.value += 1
        now = time.monotonic()
        if crossings.value == 2:  # The first step's end.
            until.value = now + 3 * run_seconds
        elif crossings.value > 2 and now > until.value:
            stop.value = 1

    barrier = ctx.Barrier(n, action=at_barrier)
    results = ctx.Queue()
    procs = [ctx.Process(target=accelerator,
                         args=(r, w, compute, paths, source, master, steps, barrier,
                               stop, results, timeout), daemon=True)
             for r in range(n)]
    for p in procs:
        p.start()
    out = []
    try:
        for _ in procs:
            out.append(results.get(timeout=4 * run_seconds + 3 * timeout))
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
    errors = [r["error"] for r in out if r["error"]]
    if errors:
        raise RuntimeError("%s x%d: %s" % (source, n, errors[0]))
    wall = max(r["seconds"] for r in out)
    samples = sum(r["samples"] for r in out)
    nbytes = sum(r["bytes"] for r in out)
    return {"accelerators": n, "au": sum(r["au"] for r in out) / n,
            "min_au": min(r["au"] for r in out), "samples_per_s": samples / wall,
            "mb_per_s": nbytes / wall / 1e6, "steps": steps,
            # The whole run's samples taken and bytes read (a check).
            "samples_taken": sum(r["taken"] for r in out),
            "bytes_read": sum(r["read"] for r in out)}


def search(trial, mark, max_n):
    """The most accelerators, up to max_n, whose run's AU reaches `mark`
    (doubling while runs pass, then bisecting), the best run, and every run
    made. 0 and None when one accelerator does not pass."""
    runs = {}

    def passes(n):
        if n not in runs:
            runs[n] = trial(n)
        return runs[n]["au"] >= mark

    if not passes(1):
        return 0, None, [runs[1]]
    lo, hi = 1, None
    while hi is None:
        n = min(lo * 2, max_n)
        if n == lo:
            break
        if passes(n):
            lo = n
        else:
            hi = n
    while hi is not None and hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            lo = mid
        else:
            hi = mid
    return lo, runs[lo], [runs[k] for k in sorted(runs)]


def warm(read, paths, chunk):
    buf = mmap.mmap(-1, chunk)
    for p in paths:
        read(p, buf, lambda n: None)


def settle(node, read, paths, chunk, warmed_at):
    """A warm cache in its steady state: the worker moves blocks read again
    (at least 5 s after their fetch) into 2 MiB pages in the background, so
    read everything once more after that and wait until it is done, rather
    than measure while it runs."""
    time.sleep(max(0.0, warmed_at + 5.5 - time.monotonic()))
    warm(read, paths, chunk)
    deadline = time.monotonic() + 300
    while (node.cluster.metric("larder_worker_huge_page_queue") > 0
           and time.monotonic() < deadline):
        time.sleep(0.5)


class Node:
    """The local cluster (master, one worker) over the datasets' directory,
    its FUSE mount and what to stop at the end."""

    def __init__(self, data, workdir, ram_bytes):
        self.procs = benchlib.Procs()
        self.mnt = os.path.join(workdir, "mnt")
        os.makedirs(self.mnt, exist_ok=True)
        self.cluster = Cluster(workers=1, allowed_root=data,
                               ram="%dMiB" % (ram_bytes // (1 << 20) + 256))
        self.cluster.start()
        self.procs.defer(self.cluster.stop)
        self.cluster.mount("/ds", "file://" + data)
        env = dict(os.environ, LARDER_MASTER=self.cluster.master)
        self.fuse = self.procs.spawn(
            [self.cluster.cli, "fuse", self.mnt,
             "--fuse_metrics_listen=127.0.0.1:%d" % free_port()],
            log=os.path.join(workdir, "fuse.log"), env=env, first=True)
        self.procs.defer(lambda: subprocess.run(["fusermount3", "-u", "-z", self.mnt],
                                                stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 30
        while not benchlib.is_mounted(self.mnt):
            if time.monotonic() > deadline or self.fuse.poll() is not None:
                raise RuntimeError("the FUSE mount did not come up; see %s/fuse.log"
                                   % workdir)
            time.sleep(0.05)

    def stop(self):
        if self.fuse.poll() is None:
            self.fuse.terminate()
            try:
                self.fuse.wait(30)
            except subprocess.TimeoutExpired:
                pass
        self.procs.cleanup()


def paths_for(source, names, data, node):
    if source in ("page_cache", "disk"):
        return [os.path.join(data, n) for n in names]
    if source == "fuse":
        return [os.path.join(node.mnt, "ds", n) for n in names]
    return ["/ds/" + n for n in names]


def print_table(rows, accelerator):
    print("accelerators fed at the AU mark (emulated %s; same run, same machine)"
          % accelerator.upper())
    head = ("workload", "source", "accelerators", "AU", "samples/s", "MB/s",
            "vs page cache", "vs disk")
    table = [head]
    by = {(r["workload"], r["source"]): r for r in rows}
    for r in rows:
        pc = by.get((r["workload"], "page_cache"))
        dk = by.get((r["workload"], "disk"))

        def ratio(ref):
            if ref is None or r["source"] == ref["source"] or not ref["accelerators"]:
                return "-"
            return "%.2f" % (r["accelerators"] / ref["accelerators"])
        best = r["best"] or {}
        table.append((r["workload"] + " (AU >= %d%%)" % round(r["mark"] * 100),
                      LABELS[r["source"]], str(r["accelerators"]),
                      "%.1f%%" % (100 * best["au"]) if best else "-",
                      "%.0f" % best["samples_per_s"] if best else "-",
                      "%.0f" % best["mb_per_s"] if best else "-",
                      ratio(pc), ratio(dk)))
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for k, row in enumerate(table):
        print("  ".join(c.ljust(widths[i]) if i < 2 else c.rjust(widths[i])
                        for i, c in enumerate(row)))
        if k == 0:
            print("  ".join("-" * wd for wd in widths))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="resnet50,unet3d,cosmoflow")
    ap.add_argument("--accelerator", default="h100", choices=["h100", "a100"])
    ap.add_argument("--compute_s", type=float, default=0,
                    help="compute time per batch (overrides --accelerator's)")
    ap.add_argument("--sources", default=",".join(SOURCES))
    ap.add_argument("--dataset_mib", type=int, default=2048,
                    help="size of each workload's dataset")
    ap.add_argument("--run_seconds", type=float, default=6,
                    help="compute time per accelerator in each run of the search")
    ap.add_argument("--max_accelerators", type=int, default=256)
    ap.add_argument("--timeout", type=float, default=60,
                    help="seconds an accelerator waits for a batch before the run fails")
    ap.add_argument("--dir", default="/tmp/larder-accbench",
                    help="where the datasets and the mount go (a local disk for the "
                         "disk row; not tmpfs)")
    ap.add_argument("--output", default="table", choices=["table", "json"])
    args = ap.parse_args()
    benchlib.unwind_on_signals()

    workloads = [WORKLOADS[n] for n in args.workloads.split(",") if n]
    sources = [s for s in args.sources.split(",") if s]
    for s in sources:
        if s not in SOURCES:
            raise SystemExit("unknown source %r (one of %s)" % (s, ", ".join(SOURCES)))
    if "python" in sources:
        try:
            import larder  # noqa: F401
        except ImportError as e:
            raise SystemExit("--sources python needs the larder module "
                             "(PYTHONPATH=build/python): %s" % e)
    data = os.path.join(args.dir, "data")
    os.makedirs(data, exist_ok=True)
    names = {w.name: generate(data, w, args.dataset_mib << 20) for w in workloads}
    total = sum(os.path.getsize(os.path.join(data, n)) for v in names.values() for n in v)
    node = None
    rows = []
    try:
        if "fuse" in sources or "python" in sources:
            node = Node(data, args.dir, total)
        for w in workloads:
            compute = args.compute_s or w.compute[args.accelerator]
            for source in sources:
                paths = paths_for(source, names[w.name], data, node)
                if source != "disk":  # Warm: read once (fills the cache).
                    client = None
                    if source == "python":
                        import larder
                        client = larder.Client(node.cluster.master)
                    read = make_reader(source, client)
                    warm(read, paths, w.chunk)
                    if source in ("fuse", "python"):
                        settle(node, read, paths, w.chunk, time.monotonic())
                    if client is not None:
                        client.close()
                master = node.cluster.master if node else None
                n, best, runs = search(
                    lambda k: run(k, w, compute, paths, source, master, args.run_seconds,
                                  args.timeout),
                    w.au, args.max_accelerators)
                rows.append({"workload": w.name, "source": source, "mark": w.au,
                             "accelerator": args.accelerator, "compute_s": compute,
                             "accelerators": n, "best": best, "runs": runs})
                if args.output == "table":
                    print("%s %s: %d (%s)" % (w.name, source, n, ", ".join(
                        "%d: %.0f%%" % (r["accelerators"], 100 * r["au"]) for r in runs)),
                        file=sys.stderr, flush=True)
    finally:
        if node is not None:
            node.stop()
    if args.output == "json":
        json.dump({"dataset_bytes": total, "rows": rows}, sys.stdout, indent=1)
        print()
    else:
        print_table(rows, args.accelerator if not args.compute_s else
                    "%.4gs-per-batch" % args.compute_s)


if __name__ == "__main__":
    main()
