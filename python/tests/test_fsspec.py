"""The larder:// fsspec protocol, found through the package's entry point."""
import fsspec
import pytest


def test_fsspec_reads_through_larder(cluster, dataset):
    _, files, _ = dataset
    opts = {"master": cluster.master}
    with fsspec.open("larder:///ds/class0/00003.jpg", "rb", **opts) as f:
        assert f.read() == files["class0/00003.jpg"]
    fs = fsspec.filesystem("larder", **opts)
    assert type(fs).__module__ == "larder.fs"
    assert fs.cat_file("larder:///ds/big.bin", start=(4 << 20) - 5, end=(4 << 20) + 5) == \
        files["big.bin"][(4 << 20) - 5:(4 << 20) + 5]
    assert fs.cat_file("/ds/big.bin", start=-10) == files["big.bin"][-10:]
    assert fs.ls("/ds", detail=False)[:2] == ["/ds/big.bin", "/ds/class0"]
    info = fs.info("larder://ds/class1/00050.jpg")
    assert info["type"] == "file" and info["size"] == len(files["class1/00050.jpg"])
    assert fs.info("/ds/class1")["type"] == "directory"
    found = fs.find("/ds/class2")
    assert found == sorted("/ds/" + r for r in files if r.startswith("class2/"))
    assert fs.glob("larder:///ds/wds/*.tar") == ["/ds/wds/train-%04d.tar" % i for i in range(4)]
    assert fs.exists("/ds/big.bin") and not fs.exists("/ds/nope")
    with fs.open("/ds/big.bin", "rb") as f:
        f.seek(12345)
        assert f.read(100) == files["big.bin"][12345:12445]
    with pytest.raises(FileNotFoundError):
        fs.open("/ds/nope", "rb")
    with pytest.raises(PermissionError):
        fs.open("/ds/new.bin", "wb")
    # Many files at once (fsspec's cat of a list).
    paths = ["/ds/class3/%05d.jpg" % i for i in range(150, 160)]
    got = fs.cat(paths)
    assert all(got[p] == files[p[len("/ds/"):]] for p in paths)
