"""PyTorch datasets that read through a Larder cluster, and a sampler that
prefetches each epoch's files in the order the epoch will read them.

    from larder.torch import LarderMapDataset, PrefetchSampler
    ds = LarderMapDataset.from_prefix("/datasets/imagenet/train", transform=decode)
    sampler = PrefetchSampler(torch.utils.data.RandomSampler(ds), ds, lookahead=512)
    loader = torch.utils.data.DataLoader(ds, batch_size=64, sampler=sampler, num_workers=8)

Importing this module imports torch; ``import larder`` alone does not.
"""
import io
import random
import re
import tarfile
import threading
from typing import NamedTuple

import torch.distributed
from torch.utils.data import Dataset, IterableDataset, Sampler, get_worker_info

from .client import Client, _clean
from .errors import NotFoundError


class LarderSample(NamedTuple):
    """One file of a LarderMapDataset: its cluster path, its bytes, and its
    class index (ImageFolder layout; -1 for a file directly in the root)."""
    path: str
    data: bytes
    target: int


def _default_client(client):
    return client if client is not None else Client()


class LarderMapDataset(Dataset):
    """One sample per file, in a stable (sorted) order.

    ``dataset[i]`` is ``transform(LarderSample(path, data, target))`` (the
    sample itself without a transform). A DataLoader with automatic batching
    reads a whole batch in one parallel call (``__getitems__``).

    ImageFolder layout: the directories directly below the root are the
    classes (``.classes``, sorted; ``.class_to_idx``); ``.targets[i]`` is
    the class of file i. ``.paths`` and ``.sizes`` list the files.

    With ``versions`` (``from_prefix`` keeps them from its listing), each
    file is read as the listing described it: a DataLoader's worker
    processes read without asking the master or the node's cache about any
    file, and a file replaced since the listing raises ObjectChangedError
    instead of mixing versions. Without them, each read looks its file up.
    """

    def __init__(self, paths, sizes=None, root=None, transform=None, client=None,
                 versions=None):
        self.client = _default_client(client)
        self.paths = [_clean(p) for p in paths]
        self.sizes = list(sizes) if sizes is not None else None
        self.versions = list(versions) if versions is not None else None
        if self.versions is not None and (
                self.sizes is None or len(self.sizes) != len(self.paths)
                or len(self.versions) != len(self.paths)):
            raise ValueError("versions need sizes, one of each per path")
        self.root = _clean(root) if root else None
        self.transform = transform
        self.classes, self.class_to_idx, self.targets = _classes(self.root, self.paths)

    @classmethod
    def from_prefix(cls, path, transform=None, suffixes=None, client=None):
        """Every file below ``path`` (at any depth) whose name ends with one
        of ``suffixes`` (e.g. ``(".jpg", ".png")``; all files when None), in
        one paged listing."""
        client = _default_client(client)
        root = _clean(path)
        entries = client.files_under(root)
        if suffixes is not None:
            suffixes = tuple(s.lower() for s in ([suffixes] if isinstance(suffixes, str)
                                                 else suffixes))
            entries = [e for e in entries if e.path.lower().endswith(suffixes)]
        return cls([e.path for e in entries], [e.size for e in entries], root=root,
                   transform=transform, client=client,
                   versions=[e.version for e in entries])

    def __len__(self):
        return len(self.paths)

    def _sample(self, i, data):
        s = LarderSample(self.paths[i], data, self.targets[i])
        return self.transform(s) if self.transform is not None else s

    def __getitem__(self, i):
        if self.versions is not None:
            return self._sample(i, self.client._read_each_known(
                [self.paths[i]], [self.sizes[i]], [self.versions[i]],
                lambda k, data: data)[0])
        return self._sample(i, self.client.read(self.paths[i]))

    def __getitems__(self, indices):
        # One exchange for the batch; each file is copied out just before its
        # transform runs, so the transform reads it from the CPU's cache.
        paths, targets, transform = self.paths, self.targets, self.transform
        indices = list(indices)
        if transform is None:
            def sample(k, data):
                i = indices[k]
                return LarderSample(paths[i], data, targets[i])
        else:
            def sample(k, data):
                i = indices[k]
                return transform(LarderSample(paths[i], data, targets[i]))
        if self.versions is not None:
            sizes, versions = self.sizes, self.versions
            return self.client._read_each_known(
                [paths[i] for i in indices], [sizes[i] for i in indices],
                [versions[i] for i in indices], sample)
        return self.client._read_each_clean([paths[i] for i in indices], sample)


def _classes(root, paths):
    if root is None:
        return [], {}, [-1] * len(paths)
    prefix = root.rstrip("/") + "/"
    first = []
    for p in paths:
        rest = p[len(prefix):] if p.startswith(prefix) else p
        first.append(rest.split("/", 1)[0] if "/" in rest else None)
    classes = sorted({c for c in first if c is not None})
    class_to_idx = {c: i for i, c in enumerate(classes)}
    return classes, class_to_idx, [class_to_idx[c] if c is not None else -1 for c in first]


# A WebDataset member name: key (directory and basename up to the first dot)
# and extension.
_MEMBER = re.compile(r"^((?:.*/|)[^./]+)\.([^/]*)$")


def _rank_and_world(rank, world_size):
    if rank is not None and world_size is not None:
        return rank, world_size
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


class LarderIterableDataset(IterableDataset):
    """Samples from tar shards (WebDataset layout: the members of one sample
    share a key, e.g. ``n01/x.jpg`` and ``n01/x.cls``), each sample a dict
    ``{"__key__": key, "__url__": shard, "jpg": bytes, "cls": bytes, ...}``
    passed through ``transform``.

    The shards are split across distributed ranks (torch.distributed, or
    ``rank``/``world_size``) and across DataLoader workers: each shard is
    read by exactly one of them. ``shuffle=True`` shuffles the shard order
    each epoch (``set_epoch``), the same on every rank. While a shard is
    read, the next one is prefetched into the cluster.
    """

    def __init__(self, shards, transform=None, shuffle=False, seed=0, rank=None,
                 world_size=None, client=None, buffer_size=4 << 20):
        self.client = _default_client(client)
        self.shards = list(shards)
        self.transform = transform
        self.shuffle = shuffle
        self.seed = seed
        self.rank, self.world_size = rank, world_size
        self.buffer_size = buffer_size
        self.epoch = 0

    @classmethod
    def from_shards(cls, pattern, **kwargs):
        """Shards named by a glob (``/datasets/wds/train-*.tar``) or a list."""
        client = _default_client(kwargs.pop("client", None))
        shards = client.glob(pattern) if isinstance(pattern, str) else list(pattern)
        if not shards:
            raise NotFoundError("no shard matches %s" % pattern, str(pattern))
        return cls(shards, client=client, **kwargs)

    def set_epoch(self, epoch):
        self.epoch = epoch

    def my_shards(self):
        """The shards this rank and DataLoader worker read, in order."""
        shards = list(self.shards)
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(shards)
        rank, world = _rank_and_world(self.rank, self.world_size)
        info = get_worker_info()
        wid, nworkers = (info.id, info.num_workers) if info is not None else (0, 1)
        return shards[rank * nworkers + wid::world * nworkers]

    def __iter__(self):
        shards = self.my_shards()
        for n, shard in enumerate(shards):
            if n + 1 < len(shards):
                self.client.prefetch([shards[n + 1]])
            for sample in self._samples(shard):
                yield self.transform(sample) if self.transform is not None else sample

    def _samples(self, shard):
        raw = self.client.open(shard)
        with io.BufferedReader(raw, buffer_size=self.buffer_size) as f, \
                tarfile.open(fileobj=f, mode="r|") as tar:
            current = None
            for member in tar:
                if not member.isfile():
                    continue
                m = _MEMBER.match(member.name)
                if m is None:
                    continue
                key, ext = m.group(1), m.group(2)
                data = tar.extractfile(member).read()
                if current is not None and current["__key__"] != key:
                    yield current
                    current = None
                if current is None:
                    current = {"__key__": key, "__url__": shard}
                current[ext] = data
            if current is not None:
                yield current


class PrefetchSampler(Sampler):
    """Wraps any sampler of a dataset whose samples are files (a
    LarderMapDataset, or any dataset with ``.paths``): each epoch it draws
    the sampler's whole order up front and keeps the next files of that
    order being fetched into the cluster ahead of the reader, so that even a
    cold epoch reads mostly cache hits.

    ``lookahead``: files kept requested ahead of the reader (default 256);
    ``lookahead_bytes``: or a byte budget instead (needs ``dataset.sizes``).
    Requests go out ``batch`` files at a time, from a thread of this
    process (the DataLoader's main process), through the client.
    """

    def __init__(self, sampler, dataset, lookahead=256, lookahead_bytes=None, batch=128,
                 client=None):
        self.sampler = sampler
        self.paths = dataset.paths
        self.sizes = getattr(dataset, "sizes", None)
        if lookahead_bytes is not None and self.sizes is None:
            raise ValueError("lookahead_bytes needs dataset.sizes")
        self.lookahead = lookahead
        self.lookahead_bytes = lookahead_bytes
        self.batch = max(1, batch)
        self.client = client or getattr(dataset, "client", None) or Client()
        self.requested = 0  # Files asked for, over all epochs (for tests and logs).
        self.errors = 0  # Prefetch calls that failed (reads still work).

    def __len__(self):
        return len(self.sampler)

    def __iter__(self):
        order = list(iter(self.sampler))
        ahead = _Ahead(self, order)
        ahead.start()  # The epoch's first files go out before its first index.
        try:
            for pos, index in enumerate(order):
                ahead.consumed(pos)
                yield index
        finally:
            ahead.stop()


class _Ahead:
    """The prefetch thread of one epoch of a PrefetchSampler."""

    def __init__(self, sampler, order):
        self.s = sampler
        self.order = order
        self.pos = 0  # Next index the reader takes.
        self.sent = 0  # order[:sent] requested.
        self.cv = threading.Condition()
        self.stopped = False
        self.thread = threading.Thread(target=self._run, name="larder-prefetch", daemon=True)

    def start(self):
        """Sends the epoch's first files, then keeps the window full from a
        thread."""
        stop = min(self._target(), self.s.batch)
        self.sent = stop
        self._send(0, stop)
        self.thread.start()

    def consumed(self, pos):
        with self.cv:
            self.pos = pos
            self.cv.notify()

    def stop(self):
        with self.cv:
            self.stopped = True
            self.cv.notify()
        self.thread.join()

    def _target(self):
        """How far the window reaches from the reader's position."""
        s, end = self.s, len(self.order)
        if s.lookahead_bytes is None:
            return min(end, self.pos + s.lookahead)
        total, i = 0, self.pos
        while i < end and total < s.lookahead_bytes:
            total += s.sizes[self.order[i]]
            i += 1
        return i

    def _run(self):
        s = self.s
        while True:
            with self.cv:
                while not self.stopped and self.sent >= self._target():
                    self.cv.wait()
                if self.stopped:
                    return
                begin = max(self.sent, self.pos)
                stop = min(self._target(), begin + s.batch)
                self.sent = stop
            self._send(begin, stop)

    def _send(self, begin, stop):
        s = self.s
        paths = [s.paths[i] for i in self.order[begin:stop]]
        try:
            s.client.prefetch(paths)
            s.requested += len(paths)
        except Exception:  # A prefetch is a hint: reads still work.
            s.errors += 1
