#!/usr/bin/python3
# Tests of shaping_proxy.py against an in-process HTTP/1.1 server (keep-alive):
# the first-byte delay per exchange, the per-connection rate, the counters in
# the stats file, SIGTERM.
#
#   /usr/bin/python3 -m pytest -q tests/servers/shaping_proxy_test.py
import http.client
import http.server
import json
import os
import signal
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from shaping_proxy import RequestParser, ShapingProxy  # noqa: E402

FIRST_BYTE_MS = 100
RATE_MBPS = 40
BIG = 20 * 1000 * 1000
ZEROS = bytes(BIG)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # Keep-alive.

    def log_message(self, *args):
        pass

    def _send(self, body, code=200):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/bucket/big"):
            return self._send(memoryview(ZEROS))
        if self.headers.get("Range"):
            return self._send(b"part", 206)
        self._send(b"hello")

    do_HEAD = do_GET

    def do_PUT(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                body += self.rfile.read(size)
                self.rfile.readline()
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._send(b"%d" % len(body))


@pytest.fixture(scope="module")
def upstream():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def proxy(upstream, tmp_path):
    p = ShapingProxy(upstream, first_byte_ms=FIRST_BYTE_MS, rate_mbps=RATE_MBPS,
                     stats_file=str(tmp_path / "stats.json"))
    p.start()
    yield p
    p.stop()


def conn(p):
    return http.client.HTTPConnection("127.0.0.1", p.port, timeout=30)


def get(c, path, headers=None):
    t = time.monotonic()
    c.request("GET", path, headers=headers or {})
    r = c.getresponse()
    first = time.monotonic() - t
    body = r.read()
    return r.status, body, first


def test_first_byte_delay(proxy, upstream):
    host, port = upstream.split(":")
    direct = http.client.HTTPConnection(host, int(port), timeout=30)
    _, _, direct_s = get(direct, "/bucket/obj")
    direct.close()
    c = conn(proxy)
    status, body, first = get(c, "/bucket/obj")
    c.close()
    assert status == 200 and body == b"hello"
    assert first >= FIRST_BYTE_MS / 1000.0
    assert first < FIRST_BYTE_MS / 1000.0 + 1.0
    assert direct_s < FIRST_BYTE_MS / 1000.0 / 2


def test_keep_alive_exchanges_each_delayed(proxy):
    c = conn(proxy)
    firsts = []
    for _ in range(5):
        status, body, first = get(c, "/bucket/obj")
        assert status == 200 and body == b"hello"
        firsts.append(first)
    c.close()
    assert min(firsts) >= FIRST_BYTE_MS / 1000.0
    s = proxy.stats()
    assert s["connections"] == 1  # One connection carried all five.
    assert s["exchanges"] == 5
    assert s["requests_by_method"] == {"GET": 5}


def download(p, out, i):
    c = conn(p)
    c.request("GET", "/bucket/big")
    r = c.getresponse()
    t = time.monotonic()  # After the first-byte delay and the headers.
    n = 0
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        n += len(b)
    out[i] = (n, n / (time.monotonic() - t) / 1e6)
    c.close()


def test_rate_one_connection(proxy):
    out = {}
    download(proxy, out, 0)
    n, mbps = out[0]
    assert n == BIG
    # Never faster than the rate; slower only as far as a busy machine makes it.
    assert RATE_MBPS * 0.5 <= mbps <= RATE_MBPS * 1.25, mbps


def test_rate_per_connection(proxy):
    out = {}
    ts = [threading.Thread(target=download, args=(proxy, out, i))
          for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for i in range(2):
        n, mbps = out[i]
        assert n == BIG
        assert RATE_MBPS * 0.5 <= mbps <= RATE_MBPS * 1.25, out
    # The proxy counts a chunk once its send returned, which may be just
    # after the client has read it: wait for the count.
    deadline = time.monotonic() + 5
    s = proxy.stats()
    while s["bytes_upstream_to_client"] < 2 * BIG and time.monotonic() < deadline:
        time.sleep(0.02)
        s = proxy.stats()
    assert s["bytes_upstream_to_client"] >= 2 * BIG


def test_counts(proxy):
    c = conn(proxy)
    get(c, "/bucket?list-type=2&prefix=x")  # A listing.
    get(c, "/bucket/a/b", {"Range": "bytes=0-3"})  # Object GET with Range.
    get(c, "/bucket/a/b")  # Object GET without.
    c.request("HEAD", "/bucket/a/b")
    c.getresponse().read()
    # Request lines inside bodies are not requests.
    fake = b"GET /bucket/x HTTP/1.1\r\nHost: h\r\n\r\n" * 1000
    c.request("PUT", "/bucket/put1", body=fake)
    r = c.getresponse()
    assert r.read() == b"%d" % len(fake)
    c.request("PUT", "/bucket/put2", body=iter([fake, b"GET / HTTP/1.1\r\n\r\n"]),
              encode_chunked=True)
    r = c.getresponse()
    assert r.read() == b"%d" % (len(fake) + 18)
    c.close()
    s = proxy.stats()
    assert s["requests_by_method"] == {"GET": 3, "HEAD": 1, "PUT": 2}
    assert s["requests"] == 6
    assert s["gets"] == {"object": 2, "listing": 1, "range": 1, "no_range": 2}
    assert s["exchanges"] == 6
    assert s["responses_by_status"] == {"200": 5, "206": 1}
    assert s["parse_errors"] == 0
    assert s["bytes_client_to_upstream"] > 2 * len(fake)
    assert s["final"] is False
    # A later snapshot counts on.
    c = conn(proxy)
    get(c, "/bucket/z")
    c.close()
    s2 = proxy.stats()
    assert s2["snapshot"] > s["snapshot"]
    assert s2["requests_by_method"]["GET"] == 4


def test_request_log(upstream, tmp_path):
    """--request_log: a line per exchange with the store's own time (the
    shaping delay left out), the connection, method, target and status."""
    log = tmp_path / "requests.log"
    p = ShapingProxy(upstream, first_byte_ms=FIRST_BYTE_MS, rate_mbps=0,
                     stats_file=str(tmp_path / "s.json"), request_log=str(log))
    p.start()
    c = conn(p)
    get(c, "/bucket/obj")
    get(c, "/bucket/a/b", {"Range": "bytes=0-3"})
    c.close()
    c = conn(p)
    c.request("HEAD", "/bucket/obj")
    c.getresponse().read()
    c.close()
    p.stop()
    lines = [ln.split() for ln in log.read_text().splitlines()]
    assert [(ln[3], ln[4], ln[5]) for ln in lines] == [
        ("GET", "/bucket/obj", "200"), ("GET", "/bucket/a/b", "206"),
        ("HEAD", "/bucket/obj", "200")]
    assert [ln[2] for ln in lines] == ["1", "1", "2"]  # Connections, in turn.
    arrived = [float(ln[0]) for ln in lines]
    assert arrived == sorted(arrived)
    # The store's time: a local server answers well within the delay.
    assert all(0 <= float(ln[1]) < FIRST_BYTE_MS / 2 for ln in lines)


def test_sigterm(upstream, tmp_path):
    stats = str(tmp_path / "s.json")
    p = ShapingProxy(upstream, first_byte_ms=0, rate_mbps=0, stats_file=stats)
    p.start()
    c = conn(p)
    get(c, "/bucket/obj")  # A connection left open: must not hold the exit.
    proc = p.proc
    t = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(5) == 0
    assert time.monotonic() - t < 2
    c.close()
    with open(stats) as f:
        d = json.load(f)
    assert d["final"] is True
    assert d["requests_by_method"] == {"GET": 1}
    p.stop()


def test_several_upstreams_in_turn(tmp_path):
    """Each new connection goes to the next upstream, in turn."""
    seen = []

    class Named(Handler):
        def do_GET(self):
            seen.append(self.server.name)
            self._send(self.server.name.encode())

    servers = []
    for name in ("a", "b", "c"):
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Named)
        srv.daemon_threads = True
        srv.name = name
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
    ups = ",".join(f"127.0.0.1:{s.server_address[1]}" for s in servers)
    p = ShapingProxy(ups, first_byte_ms=0, rate_mbps=0,
                     stats_file=str(tmp_path / "s.json"))
    p.start()
    try:
        bodies = []
        for _ in range(6):
            c = conn(p)
            for _ in range(2):  # A keep-alive connection stays with its server.
                status, body, _ = get(c, "/bucket/obj")
                assert status == 200
                bodies.append(body)
            c.close()
        assert bodies == [b"a", b"a", b"b", b"b", b"c", b"c"] * 2
        assert p.stats()["connections"] == 6
    finally:
        p.stop()
        for srv in servers:
            srv.shutdown()
            srv.server_close()


def test_parser_split_anywhere():
    """Request heads and chunk-size lines cut at every byte still parse."""
    body = b"GET /x HTTP/1.1\r\n\r\n"
    stream = (b"PUT /b/k HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body)
              + body
              + b"PUT /b/c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
              + b"%x\r\n" % len(body) + body + b"\r\n0\r\nX-T: 1\r\n\r\n"
              + b"\r\nGET /b/k HTTP/1.1\r\nRange: bytes=1-2\r\n\r\n")
    for cut in range(1, len(stream)):
        seen = []
        errors = []
        p = RequestParser(lambda m, t, r: seen.append((m, t, r)),
                          lambda: errors.append(1))
        p.feed(memoryview(stream[:cut]))
        p.feed(memoryview(stream[cut:]))
        assert errors == [], cut
        assert seen == [("PUT", "/b/k", False), ("PUT", "/b/c", False),
                        ("GET", "/b/k", True)], cut
