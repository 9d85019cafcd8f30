"""What the Python benchmarks share: processes and their CPU, ports, mounts,
and a test S3 store (s3rver processes over one directory) behind the
latency- and bandwidth-shaping front of tests/servers/shaping_proxy.py."""
import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "servers"))
import shaping_proxy  # noqa: E402

ShapingProxy = shaping_proxy.ShapingProxy

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
S3RVER = os.path.join(ROOT, "tests", "servers", "node_modules", "s3rver", "bin",
                      "s3rver.js")


def proc_cpu(pid):
    """CPU seconds (user + system) a live process has used."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


def diff(after, before):
    """after - before, for the numbers in two stats dicts (nested too)."""
    out = {}
    for k, v in after.items():
        b = before.get(k)
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)):
            out[k] = v - (b or 0)
        elif isinstance(v, dict):
            out[k] = diff(v, b or {})
    return out


def parse_cpus(text):
    """"0-3,8" -> {0, 1, 2, 3, 8}."""
    cpus = set()
    for part in text.split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def on_cpus(text):
    """A preexec_fn that puts the child on cores `text` ("" = any)."""
    cpus = parse_cpus(text)
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None


def start_s3rvers(spawn, directory, count, bucket, node="node", preexec_fn=None,
                  log=None):
    """`count` s3rver processes over one directory (s3rver keeps objects and
    multipart uploads in files, so any of them completes an upload whose
    parts went to the others); the first makes the bucket before the rest
    start. `spawn(cmd, log=..., env=..., preexec_fn=...)` starts a process
    and returns its Popen; `log(i)` names the i-th one's log. Returns
    (["127.0.0.1:PORT", ...], [pid, ...])."""
    if not os.path.exists(S3RVER):
        raise SystemExit(f"{S3RVER} is missing: run scripts/install-deps.sh")
    os.makedirs(directory, exist_ok=True)
    e = dict(os.environ, NODE_OPTIONS="--openssl-legacy-provider")
    addrs, pids = [], []
    for i in range(max(1, count)):
        port = free_port()
        proc = spawn([node, S3RVER, "--address", "127.0.0.1", "--port", str(port),
                      "--directory", directory, "--silent", "--configure-bucket",
                      bucket], log=log(i) if log else None, env=e,
                     preexec_fn=preexec_fn)
        if not wait_port(port, 30, proc):
            raise RuntimeError(f"s3rver did not listen on {port}"
                               + (f"; see {log(i)}" if log else ""))
        addrs.append(f"127.0.0.1:{port}")
        pids.append(proc.pid)
    return addrs, pids


class Procs:
    """Processes a benchmark starts, and what to undo at its end: every one
    is killed at cleanup() if still alive, after the deferred undos (run in
    reverse order) and after the ones marked `first` (e.g. writers into a
    mount that must be unmounted)."""

    def __init__(self):
        self.procs = []
        self.first = []
        self.cleanups = []

    def spawn(self, cmd, log=None, first=False, **kw):
        out = open(log, "ab") if log else subprocess.DEVNULL
        try:
            p = subprocess.Popen(cmd, stdout=kw.pop("stdout", out),
                                 stderr=kw.pop("stderr", out),
                                 stdin=subprocess.DEVNULL, **kw)
        finally:
            if log:
                out.close()
        self.procs.append(p)
        if first:
            self.first.append(p)
        return p

    def defer(self, fn):
        self.cleanups.append(fn)

    def cleanup(self):
        for p in self.first:
            if p.poll() is None:
                p.kill()
                p.wait()
        while self.cleanups:
            fn = self.cleanups.pop()
            try:
                fn()
            except Exception as e:  # noqa: BLE001
                print(f"cleanup: {e}", file=sys.stderr)
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def unwind_on_signals():
    """SIGTERM and SIGINT raise KeyboardInterrupt, so that a benchmark's
    finally unmounts and kills what it started (SIGINT set here too: a
    background job of a non-interactive shell inherits it ignored)."""
    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
