#!/usr/bin/python3
# What shaping_proxy.py can carry on this machine: N connections each pull
# SIZE bytes from a raw TCP source (a separate process that answers "N\n" with
# N zero bytes), straight and through the proxy at --rate_mbps 0
# --first_byte_ms 0 (and, with --rate_mbps R, through the proxy at that rate).
# Prints aggregate MB/s (10^6 bytes/s), the median of --rounds.
#
#   tests/servers/shaping_proxy_throughput.py [--conns 4] [--mib 256]
#       [--rounds 3] [--rate_mbps 80] [--proxy tests/servers/shaping_proxy.py]
import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from shaping_proxy import ShapingProxy  # noqa: E402

SOURCE = r"""
import socket, sys, threading
zero = memoryview(bytearray(1 << 20))
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(64)
print(ls.getsockname()[1], flush=True)
def serve(c):
    f = c.makefile("rb")
    while True:
        line = f.readline()
        if not line:
            break
        n = int(line)
        while n > 0:
            k = min(n, len(zero)); c.sendall(zero[:k]); n -= k
    c.close()
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


def pull(port, nbytes, conns):
    """conns connections in parallel, each reads nbytes; returns MB/s."""
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(conns)]
    errors = []

    def one(s):
        buf = bytearray(1 << 20)
        left = nbytes
        try:
            s.sendall(b"%d\n" % nbytes)
            while left > 0:
                n = s.recv_into(buf, min(left, len(buf)))
                if n == 0:
                    raise EOFError("short read")
                left -= n
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=one, args=(s,)) for s in socks]
    t = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    dt = time.monotonic() - t
    for s in socks:
        s.close()
    if errors:
        raise errors[0]
    return conns * nbytes / dt / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--mib", type=int, default=256, help="per connection")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate_mbps", type=float, default=80)
    ap.add_argument("--proxy", default=os.path.join(HERE, "shaping_proxy.py"))
    args = ap.parse_args()
    src = subprocess.Popen([sys.executable, "-c", SOURCE],
                           stdout=subprocess.PIPE, text=True)
    try:
        port = int(src.stdout.readline())
        nbytes = args.mib << 20
        rows = [("direct (no proxy)", None, None)]
        rows.append(("proxy, rate 0", 0, 0))
        if args.rate_mbps:
            rows.append((f"proxy, rate {args.rate_mbps:g}/conn", args.rate_mbps, 0))
        print(f"{args.conns} connections x {args.mib} MiB, median of {args.rounds}")
        for name, rate, fb in rows:
            rates = []
            if rate is None:
                for _ in range(args.rounds):
                    rates.append(pull(port, nbytes, args.conns))
            else:
                with ShapingProxy(f"127.0.0.1:{port}", first_byte_ms=fb,
                                  rate_mbps=rate, script=args.proxy,
                                  stderr=None if os.environ.get("SPX_DEBUG") else subprocess.DEVNULL) as p:
                    for _ in range(args.rounds):
                        rates.append(pull(p.port, nbytes, args.conns))
            print(f"  {name:<28} {statistics.median(rates):9.0f} MB/s aggregate"
                  f"   (rounds: {', '.join(f'{r:.0f}' for r in rates)})",
                  flush=True)
    finally:
        src.kill()
        src.wait()


if __name__ == "__main__":
    main()
