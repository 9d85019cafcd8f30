"""larder.Client against a real cluster: byte-exact reads by every call,
metadata, errors, the GIL, and fork()."""
import hashlib
import multiprocessing
import os
import pickle
import subprocess
import sys
import threading
import time

import pytest

try:  # The suite also runs in interpreters without NumPy (pip install's test).
    import numpy
except ImportError:
    numpy = None

import larder
from cluster import Cluster, free_port, port_taken
from conftest import BIG


@pytest.fixture(scope="module")
def client(cluster):
    return larder.Client(cluster.master)


def test_a_taken_port_is_told_from_other_start_up_failures():
    # gRPC's bind error and the /metrics server's: both get fresh ports.
    assert port_taken("E1127 bind: Address already in use (98)")
    assert port_taken("larder worker: UNAVAILABLE: cannot serve /metrics on "
                      "127.0.0.1:40679 (address in use or malformed)")
    assert not port_taken("larder worker: INVALID_ARGUMENT: bad --ram")


def test_read_open_and_read_many_are_byte_exact(client, dataset):
    _, files, _ = dataset
    paths = sorted(files)
    for rel in paths:
        assert client.read("/ds/" + rel) == files[rel], rel
        with client.open("/ds/" + rel) as f:
            assert f.readall() == files[rel], rel
    got = client.read_many(["/ds/" + rel for rel in paths])
    assert len(got) == len(paths)
    for rel, data in zip(paths, got):
        assert data == files[rel], rel
    assert client.read_many([]) == []
    # read_each: each file handed to fn in order, with its index.
    seen = client.read_each(["/ds/" + rel for rel in paths],
                            lambda i, data: (i, hashlib.sha256(data).hexdigest()))
    assert seen == [(i, hashlib.sha256(files[rel]).hexdigest())
                    for i, rel in enumerate(paths)]


def test_read_each_passes_errors_on_and_gives_every_lease_back(cluster, dataset):
    _, files, _ = dataset
    paths = ["/ds/" + rel for rel in sorted(files)]
    # Other tests' clients keep leases for their reads to come; a client of
    # its own here, and the count it started from.
    before = cluster.metric("larder_worker_short_circuit_leases")
    client = larder.Client(cluster.master)

    def fail_at_third(i, data):
        if i == 2:
            raise KeyError("decoder failed")
        return len(data)

    with pytest.raises(KeyError, match="decoder failed"):
        client.read_each(paths, fail_at_third)
    with pytest.raises(larder.NotFoundError) as e:
        client.read_each(paths[:3] + ["/ds/class0/missing.jpg"], lambda i, d: d)
    assert e.value.path == "/ds/class0/missing.jpg"
    # Neither failure kept a lease (the release is one-way: wait for it).
    deadline = time.monotonic() + 10
    while cluster.metric("larder_worker_short_circuit_leases") > before:
        assert time.monotonic() < deadline, "leases were not given back"
        time.sleep(0.05)
    assert client.read_each(paths, lambda i, d: len(d)) == [
        len(files[rel]) for rel in sorted(files)]
    client.close()


def test_readinto_seek_tell_at_odd_offsets_across_blocks(client, dataset):
    want = dataset[1]["big.bin"]
    assert len(want) == BIG
    with client.open("/ds/big.bin") as f:
        assert f.size == BIG and f.seekable() and f.readable()
        # Offsets on, near and across the 4 MiB block boundaries.
        for off, n in ((0, 1), (4 << 20, 7), ((4 << 20) - 3, 11), (12345, 9 << 20),
                       (BIG - 5, 100), (BIG, 10), ((8 << 20) - 1, 2)):
            assert f.seek(off) == off
            buf = bytearray(n)
            got = f.readinto(buf)
            assert got == min(n, max(0, BIG - off))
            assert bytes(buf[:got]) == want[off:off + got], (off, n)
            assert f.tell() == off + got
        # A memoryview and a NumPy array are filled in place.
        f.seek(-1000, os.SEEK_END)
        arr = numpy.zeros(1000, dtype=numpy.uint8) if numpy else bytearray(1000)
        assert f.readinto(arr) == 1000
        assert bytes(arr) == want[-1000:]
        f.seek((4 << 20) - 10)
        big = bytearray(20 + 4096)
        view = memoryview(big)[10:30]
        assert f.readinto(view) == 20
        assert bytes(big[10:30]) == want[(4 << 20) - 10:(4 << 20) + 10]
        f.seek(100)
        assert f.read(50) == want[100:150]
        assert f.read() == want[150:]
        assert f.read() == b""
        # Past the end, as a seek may go: end of file, not an error.
        f.seek(BIG + 10)
        assert f.readinto(bytearray(8)) == 0
        assert f.read(4) == b""
        assert f.pread(3, 4) == want[3:7]
    # A reused buffer, the whole file in 1 MiB reads.
    buf = bytearray(1 << 20)
    h = hashlib.sha256()
    with client.open("larder:///ds/big.bin") as f:
        while True:
            n = f.readinto(buf)
            if n == 0:
                break
            h.update(memoryview(buf)[:n])
    assert h.digest() == hashlib.sha256(want).digest()


def test_metadata_calls(client, dataset):
    _, files, _ = dataset
    st = client.stat("/ds/class1/00050.jpg")
    assert not st.is_dir and st.size == len(files["class1/00050.jpg"])
    assert st.name == "00050.jpg" and st.version and st.mtime > 0
    assert client.stat("/ds/class1").is_dir
    assert client.listdir("/ds") == ["big.bin", "class0", "class1", "class2", "class3", "wds"]
    assert client.listdir("/ds/class2") == sorted(
        os.path.basename(r) for r in files if r.startswith("class2/"))
    assert [e.name for e in client.scandir("/ds/wds")] == [
        "train-%04d.tar" % i for i in range(4)]
    walked = list(client.walk("/ds"))
    assert walked[0] == ("/ds", ["class0", "class1", "class2", "class3", "wds"], ["big.bin"])
    all_files = {os.path.join(d, n)[len("/ds/"):] for d, _, names in walked for n in names}
    assert {r for r in all_files if not r.startswith("wds/")} == set(files)
    assert client.glob("/ds/class3/*.jpg") == sorted("/ds/" + r for r in files
                                                     if r.startswith("class3/"))
    assert client.glob("/ds/class*/0000?.jpg") == ["/ds/class0/%05d.jpg" % i for i in range(10)]
    assert client.glob("/ds/**/*.tar") == ["/ds/wds/train-%04d.tar" % i for i in range(4)]
    assert client.glob("/ds/big.bin") == ["/ds/big.bin"]
    assert client.glob("/ds/nothing*") == []
    assert client.exists("/ds/big.bin") and not client.exists("/ds/nope")
    assert client.isdir("/ds/class0") and not client.isdir("/ds/big.bin")


def test_prefetch_fills_the_cluster_and_stats_count(cluster, client, dataset):
    root = dataset[0]
    cluster.mount("/pf", "file://" + root)
    paths = ["/pf/class0/%05d.jpg" % i for i in range(20)]
    assert all(client.cached_bytes(p) == 0 for p in paths)
    client.prefetch(paths)
    deadline = time.monotonic() + 20  # The master's view lags by a heartbeat.
    while time.monotonic() < deadline and not all(client.cached_bytes(p) > 0 for p in paths):
        time.sleep(0.1)
    assert all(client.cached_bytes(p) == client.stat(p).size for p in paths)
    before = client.stats()
    hits = cluster.metric("larder_worker_hits_total")
    client.read_many(paths)
    after = client.stats()
    blocks = (after["blocks_short_circuit"] + after["blocks_grpc"]) - \
        (before["blocks_short_circuit"] + before["blocks_grpc"])
    assert blocks == 20
    assert cluster.metric("larder_worker_hits_total") - hits == 20  # Every read a hit.
    assert after["metadata_hits"] > before["metadata_hits"]


def test_errors_are_larder_errors_with_python_classes(client, dataset):
    with pytest.raises(FileNotFoundError) as e:
        client.read("/ds/class0/missing.jpg")
    assert isinstance(e.value, larder.NotFoundError) and isinstance(e.value, larder.Error)
    assert e.value.code_name == "NOT_FOUND" and e.value.path == "/ds/class0/missing.jpg"
    assert e.value.errno == 2 and "missing.jpg" in str(e.value)
    with pytest.raises(larder.NotFoundError):
        client.read_many(["/ds/big.bin", "/nomount/x"])
    with pytest.raises(FileNotFoundError):
        client.open("/ds/nope")
    with pytest.raises(IsADirectoryError):
        client.open("/ds/class0")
    with pytest.raises(ValueError):
        client.read("relative/path")
    with pytest.raises(TypeError, match="unknown option 'no_such_option'.*readahead_blocks"):
        larder.Client("127.0.0.1:1", no_such_option=1)
    with pytest.raises(ValueError, match="read_threads"):
        larder.Client("127.0.0.1:1", read_threads=0)
    # Errors cross process boundaries (DataLoader workers pickle them).
    err = pickle.loads(pickle.dumps(larder.ObjectChangedError("changed", "/x")))
    assert isinstance(err, larder.ObjectChangedError) and err.path == "/x"
    assert issubclass(larder.ObjectChangedError, larder.Error)
    assert issubclass(larder.UnavailableError, ConnectionError)
    assert issubclass(larder.DeadlineExceededError, TimeoutError)
    assert issubclass(larder.UnauthenticatedError, PermissionError)


def test_unreachable_master_is_unavailable():
    c = larder.Client("127.0.0.1:%d" % free_port())
    t = time.monotonic()
    with pytest.raises(larder.UnavailableError) as e:
        c.stat("/ds/big.bin")
    assert isinstance(e.value, ConnectionError) and "master" in str(e.value)
    assert time.monotonic() - t < 30
    # LARDER_MASTER is read when no master is given.
    os.environ["LARDER_MASTER"] = "127.0.0.1:1"
    try:
        assert larder.Client().master == "127.0.0.1:1"
    finally:
        del os.environ["LARDER_MASTER"]


def test_object_replaced_while_open_raises_object_changed(cluster, client, dataset):
    root = dataset[0]
    path = os.path.join(root, "replaced.bin")
    with open(path, "wb") as f:
        f.write(b"a" * 5000)
    cluster.run("invalidate", "/ds")
    f = _open_when_seen(client, "/ds/replaced.bin")
    time.sleep(0.01)
    with open(path + ".tmp", "wb") as g:
        g.write(b"b" * 6000)
    os.rename(path + ".tmp", path)
    with pytest.raises(larder.ObjectChangedError) as e:
        f.read()
    assert e.value.code_name == "FAILED_PRECONDITION"
    # A new open sees the new version.
    cluster.run("invalidate", "/ds/replaced.bin")
    deadline = time.monotonic() + 10
    while client.stat("/ds/replaced.bin").size != 6000 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.read("/ds/replaced.bin") == b"b" * 6000
    os.unlink(path)


NODE_CHILD = r"""
import sys, larder
c = larder.Client(sys.argv[1])
paths = sys.argv[2:]
sys.stdout.write("ready\n"); sys.stdout.flush()
for _ in sys.stdin:
    out = []
    for p in paths:
        try:
            out.append("%d" % c.stat(p).size)
        except larder.NotFoundError:
            out.append("missing")
    sys.stdout.write(" ".join(out) + "\n"); sys.stdout.flush()
"""


def test_processes_on_a_node_share_one_metadata_cache(cluster, dataset):
    """Processes on a node, none forked from another (each starts with an
    empty metadata cache), stat the same files: the master answers one List
    of their directory in all (and a Stat of the missing one), the node's
    worker the rest. `larder invalidate` reaches
    every process, and one that starts after it never sees the old answer."""
    d = os.path.join(dataset[0], "fanout")
    os.makedirs(d, exist_ok=True)
    for i in range(50):
        with open(os.path.join(d, "f%02d" % i), "wb") as f:
            f.write(b"x" * (i + 1))
    cluster.mount("/fanout", "file://" + d)
    paths = ["/fanout/f%02d" % i for i in range(50)] + ["/fanout/none"]
    want = ["%d" % (i + 1) for i in range(50)] + ["missing"]

    def spawn():
        p = subprocess.Popen([sys.executable, "-c", NODE_CHILD, cluster.master] + paths,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        return p

    def ask(p):
        p.stdin.write("go\n")
        p.stdin.flush()
        return p.stdout.readline().split()

    stat = 'larder_master_rpcs_total{method="Stat"}'
    lists = 'larder_master_rpcs_total{method="List"}'
    procs = [spawn() for _ in range(8)]
    try:
        before = cluster.master_metric(stat), cluster.master_metric(lists)
        for p in procs:
            assert ask(p) == want
        # The path no listing has is Stat'ed (once per worker asked); one
        # listing per worker the processes asked (a node's worker).
        assert 1 <= cluster.master_metric(stat) - before[0] <= len(cluster.workers)
        assert 1 <= cluster.master_metric(lists) - before[1] <= len(cluster.workers)

        with open(os.path.join(d, "f00.tmp"), "wb") as f:
            f.write(b"y" * 500)
        os.rename(os.path.join(d, "f00.tmp"), os.path.join(d, "f00"))
        cluster.run("invalidate", "/fanout/f00")
        late = spawn()
        procs.append(late)
        assert ask(late)[0] == "500"
        for p in procs:
            deadline = time.monotonic() + 10
            while ask(p)[0] != "500":
                assert time.monotonic() < deadline, "a process kept the old answer"
                time.sleep(0.05)
    finally:
        for p in procs:
            p.stdin.close()
            p.wait(30)


def _open_when_seen(client, path):
    """Opens a file just written to the under-store: the client hears of
    `larder invalidate` from the master within its ring_refresh tick."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return client.open(path)
        except larder.NotFoundError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


ADMIN = "admin-token-0123456789abcdef"


def test_refused_credential(dataset, tmp_path):
    root = dataset[0]
    tokens = tmp_path / "tokens"
    tokens.write_text("admin %s\nreader reader-token-0123456789abcd\n" % ADMIN)
    worker_token = _token(tmp_path, "w", ADMIN)
    with Cluster(workers=1, allowed_root=root, token=ADMIN,
                 master_flags=["--auth_tokens_file=%s" % tokens],
                 worker_flags=["--auth_tokens_file=%s" % tokens,
                               "--token_file=%s" % worker_token]) as c:
        c.mount("/sec", "file://" + root)
        good = larder.Client(c.master, token_file=_token(tmp_path, "r", "reader-token-0123456789abcd"))
        assert good.read("/sec/class0/00000.jpg") == dataset[1]["class0/00000.jpg"]
        bad = larder.Client(c.master, token_file=_token(tmp_path, "b", "wrong-token-0123456789abcdef"))
        with pytest.raises(PermissionError) as e:
            bad.read("/sec/class0/00000.jpg")
        assert isinstance(e.value, larder.UnauthenticatedError)
        assert e.value.code_name == "UNAUTHENTICATED"
        assert "wrong-token" not in str(e.value)
        none = larder.Client(c.master)
        with pytest.raises(larder.UnauthenticatedError):
            none.stat("/sec")


def _token(tmp_path, name, token):
    p = tmp_path / ("token-" + name)
    p.write_text(token + "\n")
    p.chmod(0o600)
    return str(p)


def test_threads_read_side_by_side_without_the_gil(client, dataset):
    _, files, _ = dataset
    client.read("/ds/big.bin")  # Warm.
    stamps = []
    stop = threading.Event()

    def tick():  # Python code: runs only while this thread holds the GIL.
        while not stop.is_set():
            stamps.append(time.monotonic())
            time.sleep(0.001)

    results = {}

    def reader(name):
        data = [client.read("/ds/big.bin") for _ in range(3)]
        results[name] = all(d == files["big.bin"] for d in data)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        # One long native call (200 MiB): the other thread runs Python in
        # its first half. A call that held the GIL would let it run only
        # after returning (a pending switch is taken before the next line).
        for _ in range(3):
            t0 = time.monotonic()
            client.read_many(["/ds/big.bin"] * 20)
            t1 = time.monotonic()
            inside = [t for t in stamps if t0 < t < t0 + (t1 - t0) / 2]
            assert len(inside) >= 2, "no Python ran during %.0f ms of read_many" % (
                (t1 - t0) * 1000)
        # Two readers at once both finish, with the right bytes.
        readers = [threading.Thread(target=reader, args=(n,)) for n in ("a", "b")]
        for t in readers:
            t.start()
        for t in readers:
            t.join(60)
    finally:
        stop.set()
        ticker.join()
    assert results == {"a": True, "b": True}


_FORK_CLIENT = None  # Inherited by the pool's processes through fork().


def _child_reads(args):
    paths, digests = args
    client = _FORK_CLIENT
    got = [hashlib.sha256(client.read(p)).hexdigest() for p in paths]
    return got == digests, os.getpid()


def test_client_reconnects_after_fork(client, dataset):
    _, files, _ = dataset
    paths = ["/ds/" + r for r in sorted(files) if r.startswith("class")][:40]
    digests = [hashlib.sha256(files[p[len("/ds/"):]]).hexdigest() for p in paths]
    # The parent is connected and has a file open across the fork.
    assert client.read(paths[0]) == files[paths[0][len("/ds/"):]]
    f = client.open("/ds/big.bin")
    assert f.read(10) == files["big.bin"][:10]
    global _FORK_CLIENT
    _FORK_CLIENT = client
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(4) as pool:
        results = pool.map(_child_reads, [(paths, digests)] * 8)
    assert all(ok for ok, _ in results)
    assert len({pid for _, pid in results}) >= 2
    # A child that reads the inherited open file and lists.
    pid = os.fork()
    if pid == 0:
        ok = f.read(10) == files["big.bin"][10:20] and client.listdir("/ds/wds")
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    # The parent goes on, with the same open file.
    assert f.read(10) == files["big.bin"][10:20]
    assert client.read(paths[1]) == files[paths[1][len("/ds/"):]]
    f.close()
