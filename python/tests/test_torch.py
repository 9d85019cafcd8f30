"""larder.torch with real DataLoaders (4 worker processes, fork) over a real
cluster: every sample checked, misses counted on the workers."""
import hashlib
import os
import pickle
import signal
import subprocess
import sys
import time

import pytest
from torch.utils.data import DataLoader, RandomSampler

import larder
from cluster import Cluster
from larder.torch import LarderIterableDataset, LarderMapDataset, PrefetchSampler, _Ahead


def digest(sample):
    """The transform: what the test checks of each sample, made in the
    DataLoader's worker process."""
    return sample.path, hashlib.sha256(sample.data).hexdigest(), sample.target


def run_epoch(loader, files, prefix, step_s=0.0):
    """Checks every sample of one epoch; step_s: a training step's time
    per batch."""
    seen = {}
    for paths, digests, targets in loader:
        time.sleep(step_s)
        for p, d, t in zip(paths, digests, targets.tolist()):
            rel = p[len(prefix) + 1:]
            assert d == hashlib.sha256(files[rel]).hexdigest(), p
            assert t == int(rel.split("/")[0][len("class"):]), p
            assert p not in seen, "sample %s twice" % p
            seen[p] = True
    return len(seen)


def reader_misses(cluster, reads, hits_before):
    """Block reads that were not cache hits (each sample is one block)."""
    return reads - int(cluster.metric("larder_worker_hits_total") - hits_before)


def jpgs(files):
    return {r: d for r, d in files.items() if r.endswith(".jpg")}


def test_import_larder_does_not_import_torch():
    r = subprocess.run([sys.executable, "-c",
                        "import sys, larder; assert 'torch' not in sys.modules; print('ok')"],
                       capture_output=True, text=True)
    assert r.stdout.strip() == "ok", r.stderr


def test_map_dataset_two_epochs_second_has_no_misses(cluster, dataset):
    root, files, _ = dataset
    files = jpgs(files)
    cluster.mount("/m", "file://" + root)
    client = larder.Client(cluster.master)
    ds = LarderMapDataset.from_prefix("/m", transform=digest, suffixes=".jpg", client=client)
    assert len(ds) == len(files) == 200
    assert ds.classes == ["class0", "class1", "class2", "class3"]
    assert ds.class_to_idx["class2"] == 2 and ds.targets[0] == 0 and ds.targets[-1] == 3
    assert ds[5][0] == "/m/class0/00005.jpg"
    loader = DataLoader(ds, batch_size=16, shuffle=True, num_workers=4)
    for epoch in (1, 2):
        hits = cluster.metric("larder_worker_hits_total")
        assert run_epoch(loader, files, "/m") == 200
        misses = reader_misses(cluster, 200, hits)
        print("map dataset, no prefetch: epoch %d misses: %d of 200" % (epoch, misses))
        if epoch == 1:  # The count sees a cold epoch (the prefetch test's baseline).
            assert misses >= 180
        if epoch == 2:
            assert misses == 0


def test_default_dataloader_asks_the_master_about_no_file(cluster, dataset):
    """PyTorch's default DataLoader starts new worker processes every epoch;
    a dataset built from a listing reads each file as the listing described
    it, so no epoch sends the master a Stat. A file replaced after the
    listing raises ObjectChangedError, never mixed bytes."""
    root, files, _ = dataset
    files = jpgs(files)
    cluster.mount("/nostat", "file://" + root)
    client = larder.Client(cluster.master)
    ds = LarderMapDataset.from_prefix("/nostat", transform=digest, suffixes=".jpg",
                                      client=client)
    assert ds.versions is not None and len(ds.versions) == len(files)
    # What clients ask the master (the workers' heartbeats go on meanwhile).
    methods = ("Stat", "List", "Locate", "GetRing", "GetMounts")

    def client_rpcs():
        return {m: cluster.master_metric('larder_master_rpcs_total{method="%s"}' % m)
                for m in methods}

    loader = DataLoader(ds, batch_size=16, shuffle=True, num_workers=2)
    for epoch in (1, 2, 3):
        before = client_rpcs()
        total = cluster.master_metric("larder_master_rpcs_total")
        assert run_epoch(loader, files, "/nostat") == 200
        after = client_rpcs()
        print("default DataLoader, epoch %d: client RPCs %s, %d master RPCs in all"
              % (epoch, {m: after[m] - before[m] for m in methods},
                 cluster.master_metric("larder_master_rpcs_total") - total))
        assert after["Stat"] == before["Stat"]
        # In epoch 1 the workers may still fetch the new mount's table
        # (GetMounts): theirs, not the loader's. Then nothing at all.
        if epoch > 1:
            assert after == before
    # Pickled into a spawned worker the same: it carries the versions.
    clone = pickle.loads(pickle.dumps(ds))
    assert clone.versions == ds.versions

    # Replaced after the listing: a fresh worker process refuses it by name.
    other = os.path.join(root, "replaced")
    os.makedirs(other, exist_ok=True)
    for name in ("a.bin", "b.bin"):
        with open(os.path.join(other, name), "wb") as g:
            g.write(name.encode() * 1000)
    cluster.mount("/replaced", "file://" + other)
    ds = LarderMapDataset.from_prefix("/replaced", client=client)
    assert len(ds[0].data) == 5000
    with open(os.path.join(other, "b.tmp"), "wb") as g:
        g.write(b"new" * 3000)
    os.rename(os.path.join(other, "b.tmp"), os.path.join(other, "b.bin"))
    with pytest.raises(Exception) as e:
        next(iter(DataLoader(torch_subset(ds, [1]), batch_size=1, num_workers=1,
                             collate_fn=lambda b: b)))
    assert "ObjectChangedError" in repr(e.value) or isinstance(
        e.value, larder.ObjectChangedError), repr(e.value)
    with pytest.raises(larder.ObjectChangedError):
        ds[1]
    assert ds[0].data == b"a.bin" * 1000


def torch_subset(ds, indices):
    from torch.utils.data import Subset
    return Subset(ds, indices)


def test_prefetch_sampler_makes_a_cold_epoch_mostly_hits(cluster, dataset):
    root, files, _ = dataset
    files = jpgs(files)
    cluster.mount("/p", "file://" + root)
    client = larder.Client(cluster.master)
    ds = LarderMapDataset.from_prefix("/p", transform=digest, suffixes=".jpg", client=client)
    sampler = PrefetchSampler(RandomSampler(ds), ds, lookahead=200, batch=128)
    assert len(sampler) == 200
    loader = DataLoader(ds, batch_size=16, sampler=sampler, num_workers=4)
    hits = cluster.metric("larder_worker_hits_total")
    assert run_epoch(loader, files, "/p", step_s=0.02) == 200
    misses = reader_misses(cluster, 200, hits)
    print("map dataset, shuffle-aware prefetch: cold epoch misses: %d of 200 "
          "(%d files requested ahead)" % (misses, sampler.requested))
    assert sampler.errors == 0
    assert misses <= 40
    # By bytes: the window reaches as far as lookahead_bytes of the epoch's
    # next files, in the epoch's order.
    order = list(range(200))[::-1]
    budget = sum(ds.sizes[i] for i in order[10:25])
    by_bytes = PrefetchSampler(RandomSampler(ds), ds, lookahead_bytes=budget)
    ahead = _Ahead(by_bytes, order)
    ahead.pos = 10
    assert ahead._target() == 25
    ahead.pos = 195
    assert ahead._target() == 200
    assert sorted(by_bytes) == list(range(200))


def test_iterable_dataset_over_shards(cluster, dataset):
    _, _, samples = dataset
    client = larder.Client(cluster.master)
    ds = LarderIterableDataset.from_shards("/ds/wds/train-*.tar", client=client, shuffle=True)
    assert ds.shards == ["/ds/wds/train-%04d.tar" % i for i in range(4)]
    loader = DataLoader(ds, batch_size=None, num_workers=4)
    for epoch in range(2):
        ds.set_epoch(epoch)
        seen = set()
        for s in loader:
            key = s["__key__"]
            assert key not in seen
            seen.add(key)
            assert s["bin"] == samples[key][0] and s["cls"] == samples[key][1], key
            assert s["__url__"].startswith("/ds/wds/train-")
        assert seen == set(samples)
    # Split across ranks: disjoint, and together every sample.
    parts = [{s["__key__"] for s in LarderIterableDataset(ds.shards, rank=r, world_size=2,
                                                          client=client)}
             for r in (0, 1)]
    assert not parts[0] & parts[1] and parts[0] | parts[1] == set(samples)
    with pytest.raises(FileNotFoundError):
        LarderIterableDataset.from_shards("/ds/wds/none-*.tar", client=client)


def test_worker_killed_mid_epoch_fails_no_sample(dataset):
    root, files, _ = dataset
    files = jpgs(files)
    with Cluster(workers=3, allowed_root=root) as c:
        c.mount("/k", "file://" + root)
        client = larder.Client(c.master, worker_timeout=5)
        ds = LarderMapDataset.from_prefix("/k", transform=digest, suffixes=".jpg",
                                          client=client)
        loader = DataLoader(ds, batch_size=8, shuffle=True, num_workers=4)
        assert run_epoch(loader, files, "/k") == 200  # Warm: every owner holds its blocks.
        seen = 0
        for n, (paths, digests, targets) in enumerate(loader):
            if n == 3:
                c.workers[0].stop(signal.SIGKILL)
            for p, d in zip(paths, digests):
                assert d == hashlib.sha256(files[p[len("/k/"):]]).hexdigest(), p
                seen += 1
        assert seen == 200
