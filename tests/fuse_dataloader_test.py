#!/usr/bin/python3
# A real data loader as the Larder client: a PyTorch DataLoader with worker
# processes reads a generated image-like dataset through a Larder FUSE mount
# for two epochs, checks every sample's bytes, and checks with the workers'
# counters that the second epoch was served from the cache (no new misses).
#
#   fuse_dataloader_test.py DATASET_DIR COUNT METRICS_URL[,METRICS_URL...] \
#       FUSE_METRICS_URL
#
# Each file is "sample <index>\n" followed by the test's PatternBytes(size,
# 1000 + index) (see tests/testing/process.cc), so the loader can verify
# the header and the length, and every sample is hashed and compared across
# epochs.
import hashlib
import os
import sys
import urllib.request

import torch
from torch.utils.data import DataLoader, Dataset


class ImageFolderBytes(Dataset):
    def __init__(self, root):
        self.files = []
        for d in sorted(os.listdir(root)):
            if not os.path.isdir(os.path.join(root, d)):
                continue
            for f in sorted(os.listdir(os.path.join(root, d))):
                self.files.append(os.path.join(root, d, f))

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        path = self.files[i]
        with open(path, "rb") as f:
            data = f.read()
        index = int(os.path.basename(path).split(".")[0])
        header = b"sample %d\n" % index
        want_len = len(header) + 1000 + (index * 7919) % 15000
        ok = data.startswith(header) and len(data) == want_len
        digest = hashlib.sha256(data).digest()[:8]
        return index, int(ok), torch.tensor(list(digest), dtype=torch.uint8)


def counter(urls, name):
    total = 0.0
    for url in urls:
        with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " ") or line.startswith(name + "{"):
                    total += float(line.rsplit(" ", 1)[1])
    return total


def main():
    root, count, urls = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
    fuse = [sys.argv[4]]
    used = "larder_fuse_lease_ahead_total{result=\"used\"}"
    ds = ImageFolderBytes(root)
    assert len(ds) == count, "listed %d files, want %d" % (len(ds), count)
    loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=4,
                        persistent_workers=False)
    digests = {}
    for epoch in (1, 2):
        misses_before = counter(urls, "larder_worker_misses_total")
        hits_before = counter(urls, "larder_worker_hits_total")
        used_before = counter(fuse, used)
        seen = 0
        for index, ok, digest in loader:
            for i, good, d in zip(index.tolist(), ok.tolist(), digest):
                assert good == 1, "sample %d has wrong bytes" % i
                key = bytes(d.tolist())
                assert digests.setdefault(i, key) == key, \
                    "sample %d changed between epochs" % i
                seen += 1
        assert seen == count and len(digests) == count, (seen, len(digests))
        misses = counter(urls, "larder_worker_misses_total") - misses_before
        hits = counter(urls, "larder_worker_hits_total") - hits_before
        ahead = counter(fuse, used) - used_before
        print("epoch %d: %d samples verified" % (epoch, seen))
        print("epoch %d misses: %d hits: %d leased ahead: %d"
              % (epoch, misses, hits, ahead))
        if epoch == 2:
            assert misses == 0, "epoch 2 fetched %d blocks from the under-store" % misses
            # Every sample came from the workers' cache: none was fetched
            # (above), and the workers counted a hit for each, when the open
            # asked or earlier, when the daemon leased the file ahead of its
            # open (counted here as used), except blocks whose short-circuit
            # lease the FUSE daemon still kept from epoch 1 (it keeps up to
            # 32 for 10 s) and read without asking again.
            assert hits + ahead >= count - 32, \
                "epoch 2 had only %d cache hits and %d files leased ahead" % (
                    hits, ahead)
    return 0


if __name__ == "__main__":
    sys.exit(main())
