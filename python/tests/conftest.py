"""Fixtures: a real Larder cluster on loopback (cluster.py) over a generated
dataset in a local directory, mounted at /ds."""
import io
import os
import shutil
import sys
import tarfile
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, make_dataset, pattern_bytes  # noqa: E402

BIG = (10 << 20) + 12345  # Three 4 MiB blocks, the last one partial.


def make_shards(root, shards=4, per_shard=25):
    """WebDataset shards root/wds/train-NNNN.tar: per sample KEY.bin (pattern
    bytes) and KEY.cls (its class). Returns {key: (bin, cls)}."""
    samples = {}
    os.makedirs(os.path.join(root, "wds"), exist_ok=True)
    for s in range(shards):
        with tarfile.open(os.path.join(root, "wds", "train-%04d.tar" % s), "w") as tar:
            for j in range(per_shard):
                i = s * per_shard + j
                key = "s%04d/%06d" % (s, i)
                data = pattern_bytes(500 + (i * 104729) % 30000, 5000 + i)
                cls = str(i % 7).encode()
                samples[key] = (data, cls)
                for ext, body in (("bin", data), ("cls", cls)):
                    info = tarfile.TarInfo("%s.%s" % (key, ext))
                    info.size = len(body)
                    tar.addfile(info, io.BytesIO(body))
    return samples


@pytest.fixture(scope="module")
def dataset():
    root = tempfile.mkdtemp(prefix="larder-py-data-")
    files = make_dataset(root, classes=4, per_class=50, big_size=BIG)
    samples = make_shards(root)
    yield root, files, samples
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(dataset):
    root = dataset[0]
    with Cluster(workers=2, allowed_root=root) as c:
        c.mount("/ds", "file://" + root)
        yield c
