"""The ``larder://`` fsspec protocol: libraries that take URLs (pandas,
WebDataset, Hugging Face datasets, PyArrow) read through the cache.

    import fsspec
    with fsspec.open("larder:///datasets/tables/part-0.parquet") as f: ...
    pandas.read_csv("larder:///datasets/meta/labels.csv")
    fs = fsspec.filesystem("larder", master="larder-master:7060")

The protocol is registered with fsspec by the package's entry point (no
import needed). The URL's path is the cluster path (``larder:///a/b`` and
``larder://a/b`` both name /a/b); the master is ``master=`` in the storage
options, else ``$LARDER_MASTER``; other storage options are Client options.
Read-only: opening for writing raises PermissionError.
"""
import io

from fsspec.spec import AbstractFileSystem

from .client import Client


class LarderFileSystem(AbstractFileSystem):
    protocol = ("larder",)
    root_marker = "/"
    cachable = True

    def __init__(self, master=None, client=None, **options):
        super().__init__()
        # fsspec's own keyword arguments are not Client options.
        for k in ("skip_instance_cache", "use_listings_cache", "listings_expiry_time",
                  "max_paths"):
            options.pop(k, None)
        self.client = client if client is not None else Client(master, **options)

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        if path.startswith("larder://"):
            path = "/" + path[len("larder://"):].lstrip("/")
        elif path.startswith("larder:"):
            path = "/" + path[len("larder:"):].lstrip("/")
        if not path.startswith("/"):
            path = "/" + path
        return path.rstrip("/") or "/"

    @staticmethod
    def _info(e):
        return {"name": e.path, "size": e.size,
                "type": "directory" if e.is_dir else "file",
                "mtime": e.mtime, "version": e.version, "mode": e.mode}

    def ls(self, path, detail=True, **kwargs):
        path = self._strip_protocol(path)
        st = self.client.stat(path)
        entries = self.client.scandir(path) if st.is_dir else [st]
        return [self._info(e) for e in entries] if detail else [e.path for e in entries]

    def info(self, path, **kwargs):
        return self._info(self.client.stat(self._strip_protocol(path)))

    def find(self, path, maxdepth=None, withdirs=False, detail=False, **kwargs):
        path = self._strip_protocol(path)
        if maxdepth is not None or withdirs:
            return super().find(path, maxdepth=maxdepth, withdirs=withdirs, detail=detail,
                                **kwargs)
        st = self.client.stat(path)
        entries = self.client.files_under(path) if st.is_dir else [st]
        if detail:
            return {e.path: self._info(e) for e in entries}
        return [e.path for e in entries]

    def glob(self, path, **kwargs):
        return self.client.glob(self._strip_protocol(path))

    def ukey(self, path):
        return self.client.stat(self._strip_protocol(path)).version

    def cat_file(self, path, start=None, end=None, **kwargs):
        path = self._strip_protocol(path)
        if start is None and end is None:
            return self.client.read(path)
        with self.client.open(path) as f:
            size = f.size
            start = 0 if start is None else (start if start >= 0 else max(0, size + start))
            end = size if end is None else (end if end >= 0 else max(0, size + end))
            return f.pread(start, max(0, end - start))

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None,
              **kwargs):
        if "r" not in mode or any(c in mode for c in "wax+"):
            raise PermissionError("larder:// is read-only (mode %r)" % mode)
        raw = self.client.open(self._strip_protocol(path))
        return io.BufferedReader(raw, buffer_size=block_size or (1 << 20))
