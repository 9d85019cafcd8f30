#!/usr/bin/env python3
"""Reads files whole with N processes, as a PyTorch DataLoader's workers do.

    read_files.py LIST_FILE READERS EXPECTED_SIZE

LIST_FILE holds one path per line. Each of READERS forked processes takes
every READERS-th path, waits at a barrier, then opens, reads and closes its
files. Prints "files/s N" over the time from the barrier to the last reader's
end, or exits 1 if a file could not be read whole.
"""
import multiprocessing as mp
import sys
import time


def reader(paths, size, barrier, out):
    barrier.wait()
    start = time.monotonic()
    bad = 0
    for p in paths:
        with open(p, "rb") as f:
            if len(f.read()) != size:
                bad += 1
    out.put((start, time.monotonic(), bad))


def main():
    paths = open(sys.argv[1]).read().split("\n")
    paths = [p for p in paths if p]
    readers, size = int(sys.argv[2]), int(sys.argv[3])
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(readers), ctx.Queue()
    procs = [ctx.Process(target=reader,
                         args=(paths[i::readers], size, barrier, out))
             for i in range(readers)]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    if any(r[2] for r in results):
        print("short or failed reads", file=sys.stderr)
        sys.exit(1)
    secs = max(r[1] for r in results) - min(r[0] for r in results)
    print("files/s %.1f" % (len(paths) / secs))


if __name__ == "__main__":
    main()
