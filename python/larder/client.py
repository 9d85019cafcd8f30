"""larder.Client: reads a Larder cluster from Python, without a FUSE mount.

A block owned by the worker on this node is read by short-circuit (a pread
from the worker's memory, handed over as a file descriptor); others stream
over gRPC from their owner, with failover to the next workers and to the
under-store. Metadata comes from the process's metadata cache while fresh.
"""
import fnmatch
import io
import os
import posixpath
import re
import warnings

from . import _native
from .errors import InvalidArgumentError, NotFoundError

DEFAULT_MASTER = "127.0.0.1:7060"

FileInfo = _native.FileInfo


def _clean(path):
    """A cluster path: absolute, no trailing slash; larder:// URLs accepted."""
    if not isinstance(path, str):
        path = os.fspath(path)
    if path.startswith("larder://"):  # larder:///a/b and larder://a/b: /a/b
        path = "/" + path[len("larder://"):].lstrip("/")
    if not path.startswith("/"):
        raise InvalidArgumentError(
            "'%s' is not a cluster path (it must start with '/')" % path, path)
    if len(path) > 1 and path.endswith("/"):
        path = path.rstrip("/") or "/"
    return path


class Client:
    """A connection to a Larder cluster.

    ``master`` is host:port; default ``$LARDER_MASTER``, else 127.0.0.1:7060.
    Options are the fields of ``larder::ClientOptions`` (durations in
    seconds): node, readahead_blocks, max_workers_per_block,
    under_store_fallback, worker_timeout, ring_refresh, parallel_reads,
    metadata_cache_entries, metadata_cache_bytes, metadata_stale_window; TLS
    and the token: tls_ca_file, tls_cert_file, tls_key_file,
    tls_server_name, token_file (else ``$LARDER_TOKEN`` or
    ``$LARDER_TOKEN_FILE``); and read_threads (threads of read_many,
    default 16).

    The connection is made on first use, and made again in a process made by
    ``fork()`` (gRPC does not survive a fork): one Client can be built in the
    main process and used in every DataLoader worker. Thread-safe.
    """

    def __init__(self, master=None, **options):
        self.master = master or os.environ.get("LARDER_MASTER") or DEFAULT_MASTER
        self._options = dict(options)
        # Checks the options (TypeError for an unknown one) and connects on
        # first use; before a fork the native side closes the connection,
        # and both processes reconnect on their next call.
        self._native = _native.Client(self.master, self._options)

    def __repr__(self):
        return "larder.Client(%r)" % self.master

    def __getstate__(self):  # Pickled into spawned DataLoader workers.
        return {"master": self.master, "options": self._options}

    def __setstate__(self, state):
        self.__init__(state["master"], **state["options"])

    def close(self):
        """Drops the connection (the next call makes a new one)."""
        self._native.close()

    # -- Metadata ------------------------------------------------------------

    def stat(self, path):
        """FileInfo (path, name, is_dir, size, version, mtime, mode, uid, gid)."""
        return self._native.stat(_clean(path))

    def exists(self, path):
        try:
            self.stat(path)
            return True
        except NotFoundError:
            return False

    def isdir(self, path):
        try:
            return self.stat(path).is_dir
        except NotFoundError:
            return False

    def scandir(self, path):
        """The entries of a directory (FileInfo), sorted by path."""
        return self._native.listdir(_clean(path))

    def listdir(self, path):
        """The names in a directory, sorted (like os.listdir)."""
        return [e.name for e in self.scandir(path)]

    def files_under(self, path):
        """Every file below a directory, at any depth, sorted by path
        (FileInfo; one paged listing, not one call per directory)."""
        path = _clean(path)
        # A recursive listing of a mount holds files only; one of a
        # directory of mounts ("/", "/datasets") holds the mounts, each
        # then listed in turn.
        out, dirs = [], [path]
        while dirs:
            d = dirs.pop()
            below = d if d.endswith("/") else d + "/"
            token = ""
            while True:
                entries, token = self._native.list(d, token, 1000, True)
                for e in entries:
                    if not e.is_dir:
                        out.append(e)
                    elif len(e.path) > len(below) and e.path.startswith(below):
                        dirs.append(e.path)
                if not token:
                    break
        out.sort(key=lambda e: e.path)
        return out

    def walk(self, top):
        """Like os.walk, top-down: (dirpath, dirnames, filenames) for every
        directory below ``top`` that holds files (object stores have no
        empty directories), from one recursive listing."""
        top = _clean(top)
        if not self.stat(top).is_dir:
            return
        tree = {top: (set(), [])}
        for e in self.files_under(top):
            d = posixpath.dirname(e.path)
            tree.setdefault(d, (set(), []))[1].append(e.name)
            while d != top and len(d) > len(top):
                parent = posixpath.dirname(d)
                tree.setdefault(parent, (set(), []))[0].add(posixpath.basename(d))
                d = parent
        stack = [top]
        while stack:
            d = stack.pop()
            dirs, files = tree[d]
            dirnames = sorted(dirs)
            yield d, dirnames, sorted(files)
            stack.extend(posixpath.join(d, n) for n in reversed(dirnames))

    def glob(self, pattern):
        """Paths matching a shell pattern (``*``, ``?``, ``[..]`` within one
        component; ``**`` for any depth), sorted."""
        pattern = _clean(pattern)
        parts = pattern.split("/")
        fixed = []
        for p in parts[1:]:
            if any(c in p for c in "*?["):
                break
            fixed.append(p)
        base = "/" + "/".join(fixed)
        if len(fixed) == len(parts) - 1:  # No wildcard.
            return [pattern] if self.exists(pattern) else []
        rest = parts[1 + len(fixed):]
        if "**" in rest or len(rest) > 1:
            # Match every file below the fixed prefix, one listing.
            regex = _glob_regex(pattern)
            return [e.path for e in self.files_under(base)
                    if regex.fullmatch(e.path)]
        return [e.path for e in self.scandir(base)
                if fnmatch.fnmatchcase(e.name, rest[0])]

    # -- Data ----------------------------------------------------------------

    def open(self, path, mode="rb", overwrite=None, size_hint=0):
        """``mode="rb"``: a read-only binary file (io.RawIOBase) pinned to the
        object's version at open: readinto() fills a bytearray, memoryview or
        NumPy array without an extra copy; seek, tell, read, readall.

        ``mode="wb"`` (or ``"xb"``): a new object in a writable mount, written
        sequentially (``torch.save(obj, f)``, ``numpy.save(f, a)``); it
        appears, whole, when the file is closed, and not at all if the
        ``with`` block raises or the file is aborted (``f.abort()``). "wb"
        replaces an object already there, "xb" refuses (FileExistsError);
        ``overwrite`` overrides what the mode says. ``size_hint``: about how
        many bytes will be written (larger parts for large objects)."""
        path = _clean(path)
        if mode in ("rb", "r"):
            return LarderFile(self._native.open(path), path)
        if mode not in ("wb", "xb", "w", "x"):
            raise ValueError("larder files are opened 'rb', 'wb' or 'xb', "
                             "not %r" % (mode,))
        if overwrite is None:
            overwrite = mode.startswith("w")
        return LarderWriter(
            self._native.create(path, bool(overwrite), int(size_hint)), path)

    def write(self, path, data, overwrite=True):
        """Writes ``data`` (bytes-like) as the object ``path`` and returns its
        FileInfo: the object appears whole, or not at all."""
        with self.open(path, "wb", overwrite=overwrite,
                       size_hint=len(memoryview(data).cast("B"))) as f:
            f.write(data)
        return f.info

    def read(self, path):
        """The whole file, as bytes."""
        return self._native.read(_clean(path))

    def read_many(self, paths):
        """Whole files, as a list of bytes in the order of ``paths``, read in
        parallel in one call (the first error is raised)."""
        return self._native.read_many([_clean(p) for p in paths])

    def read_each(self, paths, fn):
        """``[fn(i, data) for i, data in enumerate(read_many(paths))]``, with
        each file copied out of the cluster's memory just before its call, so
        that ``fn`` (a decoder) finds it still in the CPU's cache. One
        exchange per batch, like read_many. ``fn`` must not fork or close
        this client."""
        return self._native.read_each([_clean(p) for p in paths], fn)

    def _read_each_clean(self, paths, fn):
        # read_each of paths already made clean (a dataset's, once).
        return self._native.read_each(paths, fn)

    def _read_each_known(self, paths, sizes, versions, fn):
        # read_each of files a dataset listed, opened from what the listing
        # said (size, version): no metadata lookup, in any process.
        return self._native.read_each_known(paths, sizes, versions, fn)

    def prefetch(self, paths):
        """Asks the owners to fetch these files into the cluster's cache, and
        returns once asked (directories are skipped)."""
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        paths = [_clean(p) for p in paths]
        if paths:
            self._native.prefetch(paths)

    def cached_bytes(self, path):
        """Bytes of the file held in the cluster's cache (the master's view,
        which lags the workers by up to a heartbeat)."""
        return self._native.cached_bytes(_clean(path))

    def stats(self):
        """This process's counters: blocks read by short-circuit, over gRPC
        and from the under-store, failovers, metadata cache hits and misses."""
        return self._native.stats()


class LarderFile(io.RawIOBase):
    """An open Larder file: read-only, seekable, pinned to its version."""

    def __init__(self, native_file, path):
        super().__init__()
        self._f = native_file
        self._pos = 0
        self.name = path
        self.info = native_file.info
        self.size = self.info.size

    def __repr__(self):
        return "<larder.LarderFile %r size=%d>" % (self.name, self.size)

    def readable(self):
        return True

    def seekable(self):
        return True

    def _file(self):
        if self.closed:
            raise ValueError("I/O operation on closed file.")
        return self._f

    def readinto(self, buffer):
        n = self._file().readinto(self._pos, buffer)
        self._pos += n
        return n

    def read(self, size=-1):
        if size is None:
            size = -1
        data = self._file().read(self._pos, size)
        self._pos += len(data)
        return data

    def readall(self):
        return self.read(-1)

    def pread(self, offset, size):
        """Bytes at [offset, offset + size), without moving the position."""
        return self._file().read(offset, size)

    def seek(self, offset, whence=io.SEEK_SET):
        self._file()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self.size + offset
        else:
            raise ValueError("invalid whence (%r)" % whence)
        if pos < 0:
            raise ValueError("negative seek position %d" % pos)
        self._pos = pos
        return pos

    def tell(self):
        self._file()
        return self._pos

    def close(self):
        self._f = None
        super().close()


class LarderWriter(io.RawIOBase):
    """A Larder object being written: sequential, write-only. close()
    commits (the object appears whole; ``info`` is then its FileInfo);
    abort(), leaving a ``with`` block by an exception, or dropping the
    writer without close() (it is aborted, with a ResourceWarning) drops
    it."""

    def __init__(self, native_writer, path):
        super().__init__()
        self._w = native_writer
        self.name = path
        self.info = None

    def __repr__(self):
        return "<larder.LarderWriter %r written=%d>" % (
            self.name, self._w.size if self._w else -1)

    def writable(self):
        return True

    def seekable(self):
        return False

    def write(self, data):
        if self.closed or self._w is None:
            raise ValueError("I/O operation on closed file.")
        view = memoryview(data).cast("B")
        self._w.write(view)
        return len(view)

    def tell(self):
        if self._w is None:
            raise ValueError("I/O operation on closed file.")
        return self._w.size

    def abort(self):
        """Drops everything written: nothing appears."""
        if self._w is not None:
            w, self._w = self._w, None
            try:
                w.abort()
            finally:
                super().close()

    def close(self):
        if self._w is not None:
            w, self._w = self._w, None
            try:
                self.info = w.close()
            finally:
                super().close()

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.abort()
        else:
            self.close()
        return False

    def __del__(self):
        # io.IOBase's finalizer would close(), which commits: a writer that
        # an exception unwound past (torch.save failing halfway through a
        # pickle) would replace the previous checkpoint with a truncated one.
        # Nothing said this object is whole, so nothing appears.
        if getattr(self, "_w", None) is None:
            return
        warnings.warn(
            "larder.LarderWriter %r dropped without close(): aborted, "
            "nothing written" % self.name, ResourceWarning, stacklevel=2)
        try:
            self.abort()
        except Exception:  # A finalizer has no caller to tell.
            pass


def _glob_regex(pattern):
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            j = pattern.find("]", i + 1)
            if j < 0:
                out.append(re.escape("["))
                i += 1
            else:
                body = pattern[i + 1:j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))
