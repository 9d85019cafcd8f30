"""Writing objects through the cache from Python: client.open(path, "wb"),
client.write, torch.save / torch.load, numpy.save, on a real cluster with a
writable file:// mount."""
import io
import os
import shutil
import tempfile

import pytest

import larder
from cluster import Cluster, pattern_bytes


@pytest.fixture(scope="module")
def ckpt():
    root = tempfile.mkdtemp(prefix="larder-py-ckpt-")
    try:
        with Cluster(workers=2, allowed_root=root) as c:
            c.mount("/ckpt", "file://" + root, "--writable")
            c.mount("/ro", "file://" + root)
            yield c, root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_open_wb_round_trip_and_appears_only_on_close(ckpt):
    c, root = ckpt
    client = larder.Client(c.master)
    data = pattern_bytes((9 << 20) + 77, 1)
    with client.open("/ckpt/run/a.bin", "wb") as f:
        for i in range(0, len(data), 1 << 20):
            assert f.write(data[i:i + (1 << 20)]) == len(data[i:i + (1 << 20)])
        assert not client.exists("/ckpt/run/a.bin")
        assert f.tell() == len(data)
    assert f.info.size == len(data)
    other = larder.Client(c.master, node="elsewhere")
    assert other.read("/ckpt/run/a.bin") == data
    with open(os.path.join(root, "run", "a.bin"), "rb") as g:
        assert g.read() == data


def test_an_exception_in_the_with_block_writes_nothing(ckpt):
    c, root = ckpt
    client = larder.Client(c.master)
    with pytest.raises(RuntimeError):
        with client.open("/ckpt/broken.bin", "wb") as f:
            f.write(pattern_bytes(6 << 20, 2))
            raise RuntimeError("training step failed")
    assert not client.exists("/ckpt/broken.bin")
    assert not any(n.startswith(".larder-upload-") for n in os.listdir(root))


def test_a_writer_dropped_without_close_writes_nothing(ckpt):
    # io.IOBase's finalizer closes a file object, and close() commits: a
    # writer that torch.save raised out of (a pickling error halfway) used to
    # replace the object with what it had written so far.
    import gc
    c, root = ckpt
    client = larder.Client(c.master)
    client.write("/ckpt/dropped.bin", b"the good checkpoint")
    f = client.open("/ckpt/dropped.bin", "wb")
    f.write(pattern_bytes(3 << 20, 5))
    with pytest.warns(ResourceWarning, match="dropped without close"):
        del f
        gc.collect()
    other = larder.Client(c.master, node="elsewhere")
    assert other.read("/ckpt/dropped.bin") == b"the good checkpoint"

    # torch.save that fails halfway (a lambda cannot be pickled) still ends
    # the zip it wrote: only close() may say the object is whole.
    torch = pytest.importorskip("torch")
    with pytest.warns(ResourceWarning, match="dropped without close"):
        with pytest.raises(Exception):
            torch.save({"weights": torch.ones(1 << 20), "fn": lambda: 0},
                       client.open("/ckpt/dropped.bin", "wb"))
        gc.collect()
    assert other.read("/ckpt/dropped.bin") == b"the good checkpoint"
    assert not any(n.startswith(".larder-upload-") for n in os.listdir(root))


def test_files_under_a_directory_of_mounts_lists_their_files(ckpt):
    # "/" holds the mounts /ckpt and /ro (both on the same directory): its
    # recursive listing is the mounts, and files_under used to return them
    # as if they were files.
    c, _ = ckpt
    client = larder.Client(c.master)
    client.write("/ckpt/under/x.bin", b"x")
    paths = [e.path for e in client.files_under("/")]
    assert "/ckpt/under/x.bin" in paths and "/ro/under/x.bin" in paths
    assert all(not e.is_dir for e in client.files_under("/"))
    walked = {d: files for d, _, files in client.walk("/")}
    assert walked["/ckpt/under"] == ["x.bin"]


def test_xb_refuses_an_existing_object_and_wb_replaces_it(ckpt):
    c, _ = ckpt
    client = larder.Client(c.master)
    info = client.write("/ckpt/x.bin", b"first")
    assert info.size == 5
    with pytest.raises(FileExistsError):
        client.open("/ckpt/x.bin", "xb")
    client.write("/ckpt/x.bin", b"second version")
    assert client.read("/ckpt/x.bin") == b"second version"


def test_a_mount_that_is_not_writable_refuses(ckpt):
    c, _ = ckpt
    client = larder.Client(c.master)
    with pytest.raises(PermissionError):
        client.open("/ro/new.bin", "wb")
    with pytest.raises(ValueError):
        client.open("/ckpt/y.bin", "ab")


def test_torch_save_and_load_through_the_client(ckpt):
    torch = pytest.importorskip("torch")
    c, _ = ckpt
    client = larder.Client(c.master)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    with client.open("/ckpt/model/step-100.pt", "wb") as f:
        torch.save(model.state_dict(), f)
    other = larder.Client(c.master, node="elsewhere")
    with other.open("/ckpt/model/step-100.pt") as f:  # Seekable: read in place.
        state = torch.load(f)
    for name, tensor in model.state_dict().items():
        assert torch.equal(state[name], tensor), name


def test_numpy_save(ckpt):
    np = pytest.importorskip("numpy")
    c, _ = ckpt
    client = larder.Client(c.master)
    a = np.arange(1 << 20, dtype=np.float32).reshape(1024, 1024)
    with client.open("/ckpt/arrays/a.npy", "wb") as f:
        np.save(f, a)
    with client.open("/ckpt/arrays/a.npy") as f:
        b = np.load(io.BytesIO(f.read()))
    assert (a == b).all()
