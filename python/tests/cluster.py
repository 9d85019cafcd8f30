"""A real Larder cluster on loopback for the Python tests and benchmarks: one
`larder master` and N `larder worker` processes of the binary that was built
(``$LARDER_CLI``, else build/cli/larder), each on free ports, with logs in a
temporary directory that is removed when the cluster stops."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def larder_cli():
    return os.environ.get("LARDER_CLI") or os.path.join(REPO, "build", "cli", "larder")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pattern_bytes(size, seed):
    """Deterministic bytes that differ at every offset and between seeds."""
    import hashlib
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.blake2b(b"%d:%d" % (seed, counter), digest_size=64).digest()
        counter += 1
    return bytes(out[:size])


# The flags whose address a daemon binds: on a first start that finds its
# port taken, each gets a fresh one.
LISTEN_FLAGS = ("--master_listen=", "--master_metrics_listen=", "--listen=",
                "--metrics_listen=")


class PortTaken(RuntimeError):
    """The daemon exited at start-up because a port it was given was taken."""


def with_fresh_port(arg):
    for flag in LISTEN_FLAGS:
        if arg.startswith(flag):
            return "%s127.0.0.1:%d" % (flag, free_port())
    return arg


def flag_value(argv, flag):
    return next(a[len(flag):] for a in argv if a.startswith(flag))


def port_taken(log_tail):
    """Whether a daemon's last words say a port it was given was taken: gRPC's
    bind error, or the /metrics server's ("cannot serve /metrics on ...
    (address in use or malformed)", which a port picked by free_port and
    taken by a parallel test's connection before the daemon bound it gives)."""
    t = log_tail.lower()
    return "address already in use" in t or "(address in use" in t


class Daemon:
    def __init__(self, argv, log, ready):
        self.argv, self.log, self.ready = argv, log, ready
        self.proc = None

    def start(self, timeout=30, repick_ports=False):
        """Starts the daemon and waits for `ready` in its log. With
        `repick_ports`, a start that fails because a port was taken (free_port
        picks a port and lets it go; a parallel test's connection can take it
        meanwhile) is tried again with fresh ports, up to 5 times, as the C++
        harness does. Restarts keep their ports: clients know them."""
        for attempt in range(5):
            try:
                return self._start_once(timeout)
            except PortTaken:
                if not repick_ports or attempt == 4:
                    raise
                self.argv = [with_fresh_port(a) for a in self.argv]

    def _start_once(self, timeout):
        start = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.log, "rb") as f:
                f.seek(start)
                if self.ready.encode() in f.read():
                    return
            if self.proc.poll() is not None:
                tail = self.tail()
                kind = PortTaken if port_taken(tail) else RuntimeError
                raise kind("%s exited at start-up:\n%s" % (self.argv[1], tail))
            time.sleep(0.02)
        raise RuntimeError("%s did not start:\n%s" % (self.argv[1], self.tail()))

    def stop(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)

    def tail(self):
        with open(self.log, "rb") as f:
            return f.read()[-4000:].decode(errors="replace")


class Cluster:
    """``Cluster(workers=2, allowed_root=DIR)``; ``.master`` is host:port."""

    def __init__(self, workers=2, allowed_root=None, worker_flags=(), master_flags=(),
                 ram="512MiB", token=None):
        self.dir = tempfile.mkdtemp(prefix="larder-py-")
        self.token = token  # The CLI's (an admin token on a secure cluster).
        self.cli = larder_cli()
        self.master = "127.0.0.1:%d" % free_port()
        roots = ["--allowed_file_roots=%s" % allowed_root] if allowed_root else []
        self.master_metrics_port = free_port()
        self._master = Daemon(
            [self.cli, "master", "--master_listen=" + self.master,
             "--master_metrics_listen=127.0.0.1:%d" % self.master_metrics_port,
             "--state_dir=" + os.path.join(self.dir, "master")] + roots + list(master_flags),
            os.path.join(self.dir, "master.log"), "larder master: gRPC port")
        self.workers = []
        self.metrics_ports = []
        for i in range(workers):
            mport = free_port()
            self.metrics_ports.append(mport)
            self.workers.append(Daemon(
                [self.cli, "worker", "--master=" + self.master, "--worker_id=worker-%d" % i,
                 "--listen=127.0.0.1:%d" % free_port(),
                 "--metrics_listen=127.0.0.1:%d" % mport,
                 "--short_circuit_socket=" + os.path.join(self.dir, "worker-%d.sock" % i),
                 "--ram_capacity=" + ram] + roots + list(worker_flags),
                os.path.join(self.dir, "worker-%d.log" % i), "larder worker: gRPC port"))

    def start(self):
        try:
            self._master.start(repick_ports=True)
            self.master = flag_value(self._master.argv, "--master_listen=")
            self.master_metrics_port = int(
                flag_value(self._master.argv, "--master_metrics_listen=").rsplit(":", 1)[1])
            for i, w in enumerate(self.workers):
                w.argv = ["--master=" + self.master if a.startswith("--master=") else a
                          for a in w.argv]
                w.start(repick_ports=True)
                self.metrics_ports[i] = int(
                    flag_value(w.argv, "--metrics_listen=").rsplit(":", 1)[1])
            self.wait_ring(len(self.workers))
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def run(self, *args, check=True):
        env = dict(os.environ, LARDER_MASTER=self.master)
        if self.token:
            env["LARDER_TOKEN"] = self.token
        r = subprocess.run([self.cli] + list(args), env=env, capture_output=True, text=True,
                           timeout=120)
        if check and r.returncode != 0:
            raise RuntimeError("larder %s: exit %d\n%s%s" % (" ".join(args), r.returncode,
                                                             r.stdout, r.stderr))
        return r

    def wait_ring(self, n, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.run("ring", check=False)
            if r.returncode == 0 and ("%d workers" % n) in r.stdout:
                return
            time.sleep(0.05)
        raise RuntimeError("the ring did not reach %d workers" % n)

    def mount(self, path, uri, *flags):
        self.run("mount", path, uri, *flags)

    def master_metric(self, name):
        """A counter of the master (e.g. 'larder_master_rpcs_total{method="Stat"}')."""
        return self.metric(name, ports=[self.master_metrics_port])

    def metric(self, name, ports=None):
        """The sum of a counter over every worker that answers."""
        total = 0.0
        for port in self.metrics_ports if ports is None else ports:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                            timeout=10) as r:
                    text = r.read().decode()
            except OSError:
                continue
            for line in text.splitlines():
                if line.startswith(name + " ") or (
                        "{" not in name and line.startswith(name + "{")):
                    total += float(line.rsplit(" ", 1)[1])
        return total

    def stop(self):
        for w in self.workers:
            w.stop()
        self._master.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def make_dataset(root, classes=4, per_class=50, big_size=0):
    """An ImageFolder-style tree: root/classK/NNNNN.jpg of pattern bytes
    (sizes 1..40 KB), plus root/big.bin of big_size bytes when asked.
    Returns {relative path: bytes}."""
    files = {}
    for c in range(classes):
        for j in range(per_class):
            i = c * per_class + j
            rel = "class%d/%05d.jpg" % (c, i)
            files[rel] = pattern_bytes(1000 + (i * 7919) % 40000, i)
    if big_size:
        files["big.bin"] = pattern_bytes(big_size, 999999)
    for rel, data in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    return files
