"""Larder's PEP 517 build backend, kept in the tree (pyproject.toml names it
with backend-path): `pip install .`, `pip wheel .` and `python -m build` work
offline, with nothing fetched from an index (it needs only the standard
library, CMake, Ninja and the C++ dependencies of scripts/install-deps.sh).

build_wheel configures a CMake build of the source tree for the interpreter
that runs it (LARDER_PYTHON=sys.executable: pybind11 takes that
interpreter's headers and extension suffix), builds the Python module only,
and packs python/larder/*.py with the module and python/METADATA (name,
version, extras: the single source of both) into a wheel tagged for that
interpreter and platform. Build trees are kept under build/pip/TAG so that a
second install is incremental; ccache (when present) shares the C++ objects
between the interpreters' trees.

Environment: LARDER_PIP_BUILD_DIR (the build tree), LARDER_BUILD_TYPE
(default Release), LARDER_JOBS (parallel compile jobs; default the CPUs).
"""
import base64
import hashlib
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = os.path.join(ROOT, "python")


class BuildError(RuntimeError):
    pass


def _metadata_text():
    with open(os.path.join(PY, "METADATA"), encoding="utf-8") as f:
        return f.read()


def _field(text, name):
    for line in text.splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    raise BuildError(f"python/METADATA has no {name}")


def _name_version():
    text = _metadata_text()
    return _field(text, "Name"), _field(text, "Version")


def _tag():
    """cp311-cp311-linux_x86_64 for the running interpreter."""
    if sys.implementation.name != "cpython":
        raise BuildError(f"the larder module is built for CPython, not {sys.implementation.name}")
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    abi = py + sys.abiflags  # "d": a debug build, "t": free-threaded.
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{py}-{abi}-{plat}"


def _dist_info(directory, tag):
    name, version = _name_version()
    info = os.path.join(directory, f"{name}-{version}.dist-info")
    os.makedirs(info, exist_ok=True)
    shutil.copyfile(os.path.join(PY, "METADATA"), os.path.join(info, "METADATA"))
    shutil.copyfile(os.path.join(PY, "entry_points.txt"), os.path.join(info, "entry_points.txt"))
    with open(os.path.join(info, "WHEEL"), "w") as f:
        f.write("Wheel-Version: 1.0\nGenerator: larder_build\nRoot-Is-Purelib: false\n"
                f"Tag: {tag}\n")
    return os.path.basename(info)


def _check_tree():
    if not os.path.exists(os.path.join(ROOT, "CMakeLists.txt")):
        raise BuildError(f"{ROOT} is not Larder's source tree: the backend builds the tree "
                         "around python/ in place (pip >= 21.3; older pips copy the "
                         "directory elsewhere first)")


def _check_tools():
    for tool in ("cmake", "ninja"):
        if shutil.which(tool) is None:
            raise BuildError(f"{tool} is missing: run scripts/install-deps.sh (as root) first")
    if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        raise BuildError(f"{sys.executable} has no headers (Python.h): install its "
                         "development package (Debian: python3-dev)")


def _run(cmd, env):
    print("larder_build:", " ".join(cmd), file=sys.stderr, flush=True)
    r = subprocess.run(cmd, env=env, stdout=sys.stderr)
    if r.returncode != 0:
        raise BuildError(f"{cmd[0]} failed (exit {r.returncode}): see the lines above")


def _build_module(tag):
    """Builds larder._native for this interpreter; returns the package
    directory the build assembled (build/pip/TAG/python/larder)."""
    _check_tree()
    _check_tools()
    # One tree per interpreter: a virtualenv's python is a link to its base
    # interpreter's, so every virtualenv of one interpreter shares it.
    exe = os.path.realpath(sys.executable)
    build = os.environ.get("LARDER_PIP_BUILD_DIR") or os.path.join(
        ROOT, "build", "pip", tag + "-" + hashlib.sha256(exe.encode()).hexdigest()[:8])
    env = dict(os.environ)
    # One ccache entry for every build tree (their paths differ, the objects
    # do not): paths below ROOT hash as relative ones.
    env.setdefault("CCACHE_BASEDIR", ROOT)
    env.setdefault("CCACHE_NOHASHDIR", "1")
    _run(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja",
          f"-DCMAKE_BUILD_TYPE={os.environ.get('LARDER_BUILD_TYPE', 'Release')}",
          f"-DLARDER_PYTHON={sys.executable}",
          f"-DLARDER_PYTHON_INSTALL_DIR={sysconfig.get_paths()['platlib']}",
          "-DLARDER_BUILD_TESTS=OFF", "-DLARDER_BUILD_BENCH=OFF"], env)
    _run(["cmake", "--build", build, "--target", "larder_python",
          "-j", os.environ.get("LARDER_JOBS", str(len(os.sched_getaffinity(0))))], env)
    return os.path.join(build, "python", "larder")


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


# -- PEP 517 hooks --

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _dist_info(metadata_directory, _tag())


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name, version = _name_version()
    tag = _tag()
    pkg = _build_module(tag)
    natives = [f for f in os.listdir(pkg) if f.startswith("_native") and f.endswith(".so")]
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    native = "_native" + suffix
    if native not in natives:
        raise BuildError(f"the build made {natives or 'no module'}, not {native}")
    files = []  # (arcname, bytes)
    for f in sorted(os.listdir(os.path.join(PY, "larder"))):
        if f.endswith(".py"):
            with open(os.path.join(PY, "larder", f), "rb") as fh:
                files.append((f"larder/{f}", fh.read()))
    with open(os.path.join(pkg, native), "rb") as fh:
        files.append((f"larder/{native}", fh.read()))
    with tempfile.TemporaryDirectory() as tmp:
        info = _dist_info(tmp, tag)
        for f in sorted(os.listdir(os.path.join(tmp, info))):
            with open(os.path.join(tmp, info, f), "rb") as fh:
                files.append((f"{info}/{f}", fh.read()))
    wheel = f"{name}-{version}-{tag}.whl"
    os.makedirs(wheel_directory, exist_ok=True)
    record = [_record_line(a, d) for a, d in files] + [f"{info}/RECORD,,"]
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w",
                         compression=zipfile.ZIP_DEFLATED) as z:
        for arcname, data in files:
            zi = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
            zi.external_attr = (0o755 if arcname.endswith(".so") else 0o644) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel


def build_sdist(sdist_directory, config_settings=None):
    """The source tree as git tracks it (or, outside a clone, every file but
    build trees and caches), with PKG-INFO at its top."""
    name, version = _name_version()
    base = f"{name}-{version}"
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True,
                             check=True).stdout
        paths = [p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        paths = []
        for d, dirs, names in os.walk(ROOT):
            rel = os.path.relpath(d, ROOT)
            dirs[:] = [x for x in dirs if not (rel == "." and x.startswith("build"))
                       and x not in (".git", "__pycache__", "node_modules")]
            paths += [os.path.normpath(os.path.join(rel, n)) for n in names]
    os.makedirs(sdist_directory, exist_ok=True)
    sdist = f"{base}.tar.gz"
    _check_tree()
    with tarfile.open(os.path.join(sdist_directory, sdist), "w:gz") as tar:
        for p in sorted(paths):
            full = os.path.join(ROOT, p)
            if os.path.isfile(full):
                tar.add(full, arcname=f"{base}/{p}", recursive=False)
        data = _metadata_text().encode()
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(data)
        ti.mtime = 0
        tar.addfile(ti, io.BytesIO(data))
    return sdist
