#!/usr/bin/python3
# A latency- and bandwidth-shaping TCP front for HTTP test servers (s3rver on
# loopback answers in microseconds and at GB/s; real S3 takes tens of ms to the
# first byte and gives each connection roughly 50-100 MB/s).
#
#   shaping_proxy.py --upstream HOST:PORT[,HOST:PORT...] [--listen PORT]
#                    [--first_byte_ms 25] [--rate_mbps 80] [--stats_file FILE]
#                    [--bind 127.0.0.1] [--request_log FILE]
#                    [--later_page_ms 0] [--drop_response_of REGEX]
#
# It accepts on 127.0.0.1:PORT (0: the kernel picks; either way it prints one
# line "listening on 127.0.0.1:PORT" on stdout once it accepts) and forwards
# every connection to HOST:PORT, byte for byte. With several upstreams (one
# store's servers, e.g. s3rver processes over one directory, as a load balancer
# spreads a real store's connections) each new connection goes to the next, in
# turn. Shaping:
#
#   --first_byte_ms  each request/response exchange waits this long before the
#       first byte of the response goes to the client. A new response is
#       upstream bytes arriving after the client has sent bytes since the last
#       response bytes, so a keep-alive connection pays the delay once per
#       exchange (and once more for an "HTTP/1.1 100 Continue", which is a round
#       trip on real S3 too), never per chunk. Pipelined requests sent before
#       any response share one delay.
#   --rate_mbps  MB/s (10^6 bytes/s) per connection and per direction, a token
#       bucket one buffer (256 KiB) deep; 0 = unlimited.
#   --later_page_ms  for tests of what waits on a listing: the answer to a
#       request for a listing's later page (a target with S3's
#       "continuation-token=" or Azure's "marker=") waits this much longer.
#   --drop_response_of REGEX  for tests of a response lost after the store
#       acted: the first request whose "METHOD target" matches REGEX reaches
#       the store, and its answer is not forwarded: both connections close.
#
# Counters: connections, exchanges (delays applied), responses by status code
# (read from the first line of each response), bytes each way, and requests by
# method, parsed from the client's stream with HTTP/1.1 framing
# (Content-Length and chunked bodies are skipped, so bodies are never mistaken
# for request lines). GETs are split into object GETs and listings (path-style
# addressing: a GET whose path has at most one segment, "/bucket?list-type=2",
# is a listing) and into GETs with and without a Range header. They are written
# as JSON to --stats_file on SIGUSR1 (mid-run; "snapshot" counts the writes) and
# on SIGTERM/SIGINT (then "final": true), and printed to stderr on exit.
#
# --request_log FILE: one line per exchange, written as its response starts:
# seconds since the front started (when the request's first line arrived),
# ms from then to the store's first response byte (before the shaping delay:
# what the store took, queueing in it included, and for a body, its upload),
# the connection's number (1, 2, ... in the order accepted), the method, the
# target (at most 160 characters) and the status (an "HTTP/1.1 100 Continue"
# takes its request's line; the final answer then has none). For finding
# where a run's time goes: which requests wait on which. The log is flushed on
# SIGUSR1 (with the counters) and on exit.
#
# Threads, two per connection, recv_into/sendall on 256 KiB buffers. On the
# 2-core VM (shared, load ~7) it carried 1.5-2.6 GB/s aggregate at rate 0 over
# 4 or 16 connections, against 1.6 GB/s for a bare asyncio Protocol relay
# (no shaping, no counters); at 80 MB/s it gives 4 connections 319 MB/s and 16
# connections 1.18 GB/s (tests/servers/shaping_proxy_throughput.py).
#
# Also importable: ShapingProxy starts one as a subprocess, reads its port and
# its counters (stats() sends SIGUSR1 and waits for the new snapshot).
import argparse
import collections
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

# A request for a listing's later page (--later_page_ms).
LATER_PAGE = re.compile(r"[?&](continuation-token|marker)=")

BUF = 256 * 1024
MAX_HEAD = 64 * 1024
METHODS = (b"GET", b"PUT", b"POST", b"HEAD", b"DELETE", b"OPTIONS", b"PATCH",
           b"CONNECT", b"TRACE")


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.connections = 0
        self.active = 0
        self.exchanges = 0
        self.responses_by_status = {}
        self.requests_by_method = {}
        self.get_object = 0
        self.get_listing = 0
        self.get_range = 0
        self.get_no_range = 0
        self.bytes_c2u = 0
        self.bytes_u2c = 0
        self.parse_errors = 0
        self.upstream_connect_errors = 0
        self.snapshot = 0

    def add(self, name, n=1):
        with self.lock:
            setattr(self, name, getattr(self, name) + n)

    def request(self, method, target, has_range):
        with self.lock:
            self.requests_by_method[method] = (
                self.requests_by_method.get(method, 0) + 1)
            if method == "GET":
                path = target.split("?", 1)[0]
                if path.startswith("http://") or path.startswith("https://"):
                    path = "/" + path.split("/", 3)[-1]
                if len([p for p in path.split("/") if p]) <= 1:
                    self.get_listing += 1
                else:
                    self.get_object += 1
                if has_range:
                    self.get_range += 1
                else:
                    self.get_no_range += 1

    def response(self, status):
        with self.lock:
            self.exchanges += 1
            self.responses_by_status[status] = (
                self.responses_by_status.get(status, 0) + 1)

    def as_dict(self, args, final):
        with self.lock:
            self.snapshot += 1
            return {
                "upstream": args.upstream,
                "first_byte_ms": args.first_byte_ms,
                "rate_mbps": args.rate_mbps,
                "uptime_s": round(time.monotonic() - self.started, 3),
                "cpu_s": round(time.process_time(), 3),  # All threads.
                "connections": self.connections,
                "active_connections": self.active,
                "exchanges": self.exchanges,
                "responses_by_status": dict(self.responses_by_status),
                "requests": sum(self.requests_by_method.values()),
                "requests_by_method": dict(self.requests_by_method),
                "gets": {"object": self.get_object,
                         "listing": self.get_listing,
                         "range": self.get_range,
                         "no_range": self.get_no_range},
                "bytes_client_to_upstream": self.bytes_c2u,
                "bytes_upstream_to_client": self.bytes_u2c,
                "parse_errors": self.parse_errors,
                "upstream_connect_errors": self.upstream_connect_errors,
                "snapshot": self.snapshot,
                "final": final,
            }


class RequestParser:
    """Follows HTTP/1.1 request framing in the client's byte stream and reports
    each request line (method, target, has Range). Body bytes cost a
    subtraction per chunk; only heads and chunk-size lines are copied."""

    HEAD, BODY, CHUNK_SIZE, CHUNK_DATA, CHUNK_CRLF, TRAILER, DEAD = range(7)

    def __init__(self, on_request, on_error):
        self.on_request = on_request
        self.on_error = on_error
        self.state = self.HEAD
        self.buf = bytearray()
        self.remaining = 0

    def feed(self, data):  # data: a memoryview, valid only during the call
        i, n = 0, len(data)
        while i < n and self.state != self.DEAD:
            st = self.state
            if st == self.BODY or st == self.CHUNK_DATA:
                take = min(self.remaining, n - i)
                self.remaining -= take
                i += take
                if self.remaining == 0:
                    self.state = self.HEAD if st == self.BODY else self.CHUNK_CRLF
                continue
            # Line-oriented states: collect into buf up to a delimiter.
            delim = b"\r\n\r\n" if st == self.HEAD else b"\r\n"
            start = max(0, len(self.buf) - len(delim) + 1)
            self.buf += data[i:]
            pos = self.buf.find(delim, start)
            if pos < 0:
                if len(self.buf) > MAX_HEAD:
                    self.fail()
                return
            end = pos + len(delim)
            consumed_here = end - (len(self.buf) - (n - i))
            line = bytes(self.buf[:pos])
            self.buf.clear()
            i += consumed_here
            self.line(st, line)

    def fail(self):
        self.state = self.DEAD
        self.buf = bytearray()
        self.on_error()

    def line(self, st, text):
        if st == self.HEAD:
            text = text.lstrip(b"\r\n")  # Stray CRLFs between requests.
            if not text:
                return
            lines = text.split(b"\r\n")
            parts = lines[0].split(b" ")
            if len(parts) != 3 or parts[0] not in METHODS:
                return self.fail()
            length, chunked, has_range = 0, False, False
            for h in lines[1:]:
                name, _, value = h.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    try:
                        length = int(value.strip())
                    except ValueError:
                        return self.fail()
                elif name == b"transfer-encoding":
                    chunked = b"chunked" in value.lower()
                elif name == b"range":
                    has_range = True
            self.on_request(parts[0].decode("ascii"),
                            parts[1].decode("latin-1"), has_range)
            if chunked:
                self.state = self.CHUNK_SIZE
            elif length > 0:
                self.state, self.remaining = self.BODY, length
            else:
                self.state = self.HEAD
        elif st == self.CHUNK_SIZE:
            try:
                size = int(text.split(b";", 1)[0].strip(), 16)
            except ValueError:
                return self.fail()
            if size == 0:
                self.state = self.TRAILER
            else:
                self.state, self.remaining = self.CHUNK_DATA, size
        elif st == self.CHUNK_CRLF:
            if text:
                return self.fail()
            self.state = self.CHUNK_SIZE
        elif st == self.TRAILER:
            if not text:  # The empty line that ends the trailers.
                self.state = self.HEAD


class Pacer:
    """Token bucket one chunk deep: a chunk of n bytes may leave at `next`,
    and moves `next` on by n / rate."""

    def __init__(self, rate_bps):
        self.rate = rate_bps
        self.next = 0.0

    def reset(self):
        self.next = time.monotonic()

    def wait(self, n):
        if self.rate <= 0:
            return
        now = time.monotonic()
        if self.next > now:
            time.sleep(self.next - now)
            now = self.next
        self.next = now + n / self.rate


class Connection:
    def __init__(self, proxy, client):
        self.proxy = proxy
        self.client = client
        self.upstream = None
        # Set by the client->upstream pump when it forwards bytes, cleared when
        # upstream bytes arrive: the next upstream bytes start a new response.
        self.client_spoke = False
        self.done = 0
        self.lock = threading.Lock()
        self.number = 0  # Set by serve().
        # With --request_log or --later_page_ms: (arrival, method, target)
        # of requests not yet answered, in order (HTTP/1.1 answers them in
        # order).
        self.pending = collections.deque()

    def on_request(self, method, target, has_range):
        self.proxy.stats.request(method, target, has_range)
        if (self.proxy.request_log is not None or self.proxy.later_page > 0
                or self.proxy.drop is not None):
            self.pending.append((time.monotonic(), method, target))

    def run(self, upstream_addr):
        p = self.proxy
        try:
            self.upstream = socket.create_connection(upstream_addr, timeout=10)
            self.upstream.settimeout(None)
            self.upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            p.stats.add("upstream_connect_errors")
            self.close()
            return
        t = threading.Thread(target=self.pump_up, daemon=True)
        t.start()
        self.pump_down()

    def finish(self):
        with self.lock:
            self.done += 1
            last = self.done == 2
        if last:
            self.close()

    def close(self):
        for s in (self.client, self.upstream):
            if s is None:
                continue
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass
        self.proxy.forget(self)

    def abort(self):
        """Wakes both pumps (used on errors and at exit)."""
        for s in (self.client, self.upstream):
            if s is None:
                continue
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def pump_up(self):
        p = self.proxy
        buf = bytearray(BUF)
        view = memoryview(buf)
        pacer = Pacer(p.rate)
        parser = RequestParser(self.on_request,
                               lambda: p.stats.add("parse_errors"))
        src, dst = self.client, self.upstream
        try:
            while True:
                n = src.recv_into(buf)
                if n == 0:
                    try:
                        dst.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    break
                chunk = view[:n]
                try:
                    parser.feed(chunk)
                except Exception:  # noqa: BLE001 (never stop forwarding)
                    parser.fail()
                pacer.wait(n)
                self.client_spoke = True  # Before the upstream can answer.
                dst.sendall(chunk)
                p.stats.add("bytes_c2u", n)
        except Exception:  # noqa: BLE001 (OSError, mostly)
            self.abort()
        finally:
            self.finish()

    def pump_down(self):
        p = self.proxy
        buf = bytearray(BUF)
        view = memoryview(buf)
        pacer = Pacer(p.rate)
        src, dst = self.upstream, self.client
        try:
            while True:
                n = src.recv_into(buf)
                if n == 0:
                    try:
                        dst.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    break
                if self.client_spoke:
                    self.client_spoke = False
                    status = "?"
                    if n >= 12 and buf[:5] == b"HTTP/":
                        status = bytes(buf[9:12]).decode("latin-1")
                    p.stats.response(status)
                    delay = p.first_byte
                    if self.pending:
                        request = self.pending.popleft()
                        if p.request_log is not None:
                            p.log_exchange(self, request, status)
                        if p.later_page > 0 and LATER_PAGE.search(request[2]):
                            delay += p.later_page
                        if p.take_drop("%s %s" % (request[1], request[2])):
                            p.stats.add("responses_dropped")
                            self.abort()
                            break
                    if delay > 0:
                        time.sleep(delay)
                    pacer.reset()
                chunk = view[:n]
                pacer.wait(n)
                dst.sendall(chunk)
                p.stats.add("bytes_u2c", n)
        except Exception:  # noqa: BLE001 (OSError, mostly)
            self.abort()
        finally:
            self.finish()


class Proxy:
    def __init__(self, args):
        self.args = args
        self.upstreams = []
        for u in args.upstream.split(","):
            host, _, port = u.strip().rpartition(":")
            self.upstreams.append((host or "127.0.0.1", int(port)))
        self.next_upstream = 0  # Round robin; taken by serve() alone.
        self.first_byte = args.first_byte_ms / 1000.0
        self.later_page = args.later_page_ms / 1000.0
        self.drop = (re.compile(args.drop_response_of)
                     if args.drop_response_of else None)
        self.drop_lock = threading.Lock()
        self.rate = args.rate_mbps * 1e6
        self.stats = Stats()
        self.conns = set()
        self.conns_lock = threading.Lock()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((args.bind, args.listen))
        self.listener.listen(512)
        self.port = self.listener.getsockname()[1]
        self.closing = False
        self.request_log = None
        self.log_lock = threading.Lock()
        if args.request_log:
            self.request_log = open(args.request_log, "w", buffering=1 << 16)

    def take_drop(self, request):
        """True once: for the first request --drop_response_of matches."""
        if self.drop is None or not self.drop.search(request):
            return False
        with self.drop_lock:
            if self.drop is None:
                return False
            self.drop = None
            return True

    def log_exchange(self, conn, request, status):
        arrived, method, target = request
        now = time.monotonic()
        line = (f"{arrived - self.stats.started:.4f} "
                f"{(now - arrived) * 1000:.2f} {conn.number} {method} "
                f"{target[:160]} {status}\n")
        with self.log_lock:
            self.request_log.write(line)

    def forget(self, conn):
        with self.conns_lock:
            if conn in self.conns:
                self.conns.discard(conn)
                self.stats.add("active", -1)

    def serve(self):
        while True:
            try:
                c, _ = self.listener.accept()
            except OSError:
                if self.closing:
                    return
                time.sleep(0.01)  # EMFILE and the like: try again.
                continue
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(self, c)
            conn.number = self.next_upstream + 1  # 1, 2, ... as accepted.
            with self.conns_lock:
                self.conns.add(conn)
            with self.stats.lock:
                self.stats.connections += 1
                self.stats.active += 1
            addr = self.upstreams[self.next_upstream % len(self.upstreams)]
            self.next_upstream += 1
            threading.Thread(target=conn.run, args=(addr,), daemon=True).start()

    def write_stats(self, final):
        d = self.stats.as_dict(self.args, final)
        if self.args.stats_file:
            tmp = self.args.stats_file + ".tmp"
            with open(tmp, "w") as f:
                json.dump(d, f, indent=1, sort_keys=True)
                f.write("\n")
            os.replace(tmp, self.args.stats_file)
        return d

    def shutdown(self):
        self.closing = True
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        with self.conns_lock:
            conns = list(self.conns)
        for c in conns:
            c.abort()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--upstream", required=True,
                    help="HOST:PORT, or several separated by commas")
    ap.add_argument("--listen", type=int, default=0)
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--first_byte_ms", type=float, default=25.0)
    ap.add_argument("--rate_mbps", type=float, default=80.0)
    ap.add_argument("--stats_file", default="")
    ap.add_argument("--request_log", default="",
                    help="one line per exchange (see the header)")
    ap.add_argument("--drop_response_of", default="")
    ap.add_argument("--later_page_ms", type=float, default=0.0,
                    help="extra wait for the answers to a listing's later pages")
    args = ap.parse_args(argv)

    # The signals are taken by sigwait in the main thread; every thread started
    # from here inherits the mask, so none of them is interrupted.
    sigs = {signal.SIGTERM, signal.SIGINT, signal.SIGUSR1}
    signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    proxy = Proxy(args)
    threading.Thread(target=proxy.serve, daemon=True).start()
    print(f"listening on {args.bind}:{proxy.port}", flush=True)
    while True:
        sig = signal.sigwait(sigs)
        if sig == signal.SIGUSR1:
            if proxy.request_log is not None:
                with proxy.log_lock:
                    proxy.request_log.flush()
            proxy.write_stats(final=False)
            continue
        break
    proxy.shutdown()
    if proxy.request_log is not None:
        with proxy.log_lock:
            proxy.request_log.flush()
    d = proxy.write_stats(final=True)
    print("shaping_proxy: " + json.dumps(d, sort_keys=True), file=sys.stderr,
          flush=True)
    return 0


class ShapingProxy:
    """Runs shaping_proxy.py as a subprocess: `with ShapingProxy(...) as p:`,
    p.port, p.endpoint, p.stats() (mid-run), p.stop() (returns the final
    stats)."""

    def __init__(self, upstream, first_byte_ms=25, rate_mbps=80,
                 stats_file=None, python=None, stderr=None, script=None,
                 preexec_fn=None, request_log=None, later_page_ms=0):
        self.upstream = upstream
        self.script = script or os.path.abspath(__file__)
        self.first_byte_ms = first_byte_ms
        self.rate_mbps = rate_mbps
        self.stats_file = stats_file
        self.python = python or sys.executable or "/usr/bin/python3"
        self.stderr = stderr
        self.preexec_fn = preexec_fn  # For the subprocess (e.g. its cores).
        self.request_log = request_log
        self.later_page_ms = later_page_ms
        self.proc = None
        self.port = None

    def start(self):
        if self.stats_file is None:
            import tempfile
            fd, self.stats_file = tempfile.mkstemp(prefix="shaping_proxy.",
                                                   suffix=".json")
            os.close(fd)
            os.unlink(self.stats_file)
        self.proc = subprocess.Popen(
            [self.python, self.script, "--upstream",
             self.upstream, "--first_byte_ms", str(self.first_byte_ms),
             "--rate_mbps", str(self.rate_mbps), "--stats_file",
             self.stats_file] +
            (["--request_log", self.request_log] if self.request_log else []) +
            (["--later_page_ms", str(self.later_page_ms)] if self.later_page_ms else []),
            stdout=subprocess.PIPE, stderr=self.stderr, text=True,
            preexec_fn=self.preexec_fn)
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"shaping_proxy did not start: {line!r}")
        self.port = int(line.rsplit(":", 1)[1])
        return self

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def _read(self):
        try:
            with open(self.stats_file) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def stats(self, timeout=10.0):
        before = self._read()
        seq = before["snapshot"] if before else 0
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            d = self._read()
            if d and d["snapshot"] > seq:
                return d
            time.sleep(0.005)
        raise TimeoutError("shaping_proxy wrote no stats")

    def stop(self, timeout=10.0):
        if self.proc is None:
            return self._read()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None
        d = self._read()
        return d

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        try:
            os.unlink(self.stats_file)
        except OSError:
            pass


if __name__ == "__main__":
    sys.exit(main())
