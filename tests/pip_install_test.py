"""`pip install .` and `pip install ./python` from the source tree, offline
(--no-index), into fresh virtualenvs of the interpreter on PATH and of
Debian's /usr/bin/python3: the in-tree PEP 517 backend (python/build_backend)
builds the native module for that interpreter, `import larder` works there
from the virtualenv (not from the build tree), the installed distribution
declares its version and extras, and the Python suite's client tests (and the
torch tests, where the interpreter has torch) pass in that interpreter against
a real cluster. `pip wheel .` makes a wheel tagged for the interpreter.

Run by ctest (tests/CMakeLists.txt) with LARDER_CLI set to the built CLI.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEBIAN = "/usr/bin/python3"
DIST_PACKAGES = "/usr/lib/python3/dist-packages"


def real_executable(cmd):
    r = subprocess.run([cmd, "-c", "import sys; print(sys.executable)"], capture_output=True,
                       text=True, timeout=60)
    return os.path.realpath(r.stdout.strip()) if r.returncode == 0 else None


def interpreter(which):
    """The command for `which` ("path": python3 on PATH; "debian"), or a skip."""
    if which == "debian":
        if not os.path.exists(DEBIAN):
            pytest.skip("no /usr/bin/python3")
        return DEBIAN
    cmd = shutil.which("python3")
    if cmd is None:
        pytest.skip("no python3 on PATH")
    exe = real_executable(cmd)
    if exe is None or exe == os.path.realpath(DEBIAN):
        pytest.skip(f"python3 on PATH ({cmd}) is Debian's: the debian case covers it")
    return cmd


def pytest_shim(venv_python, tmp):
    """A directory to put on PYTHONPATH so that `venv_python -m pytest` runs
    where the interpreter has no pytest (no index to install it from): links
    to Debian's pure-Python pytest and the packages it imports. None where
    the interpreter has pytest."""
    if subprocess.run([venv_python, "-c", "import pytest"], capture_output=True).returncode == 0:
        return None
    code = ("import os, sys, pytest, _pytest.main, _pytest.python, _pytest.fixtures, "
            "_pytest.assertion.rewrite, _pytest.capture, _pytest.logging, "
            "_pytest.monkeypatch, _pytest.tmpdir, _pytest.skipping, _pytest.terminal\n"
            f"root = {DIST_PACKAGES!r}\n"
            "tops = {os.path.relpath(m.__file__, root).split(os.sep)[0]\n"
            "        for m in list(sys.modules.values())\n"
            "        if (getattr(m, '__file__', None) or '').startswith(root + '/')}\n"
            "print('\\n'.join(sorted(tops)))\n")
    r = subprocess.run([DEBIAN, "-c", code], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        pytest.skip(f"{venv_python} has no pytest, and Debian's is missing: {r.stderr[-300:]}")
    shim = os.path.join(tmp, "pytest-shim")
    os.makedirs(shim)
    for top in r.stdout.split():
        os.symlink(os.path.join(DIST_PACKAGES, top), os.path.join(shim, top))
    return shim


def run(cmd, **kw):
    kw.setdefault("timeout", 1200)
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout[-4000:]}\n{r.stderr[-6000:]}"
    return r


@pytest.mark.parametrize("which", ["path", "debian"])
def test_pip_install_from_the_source_tree(which):
    python = interpreter(which)
    tmp = tempfile.mkdtemp(prefix=f"larder-pip-{which}-")
    try:
        venv = os.path.join(tmp, "venv")
        # Debian's torch, NumPy and pytest are system packages: the virtualenv
        # sees them (its own site-packages, with larder, comes first).
        run([python, "-m", "venv"] + (["--system-site-packages"] if which == "debian" else [])
            + [venv])
        vpy = os.path.join(venv, "bin", "python")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", LARDER_JOBS="2")
        # From python/ for the PATH interpreter, from the top of the tree for Debian's
        # (both name the backend); Debian's also makes the wheel where the PATH one is
        # Debian's, so a Debian-only machine checks the top-level install and the wheel.
        source = ROOT if which == "debian" else os.path.join(ROOT, "python")
        run([vpy, "-m", "pip", "install", "--no-index", "--no-cache-dir", source], env=env,
            cwd=tmp)

        probe = ("import importlib.metadata as md, larder, sys\n"
                 "m = md.metadata('larder')\n"
                 "print(larder.__file__)\n"
                 "print(md.version('larder'), larder.__version__)\n"
                 "print(','.join(sorted(m.get_all('Provides-Extra'))))\n"
                 "eps = md.entry_points()\n"
                 "eps = eps.select(group='fsspec.specs') if hasattr(eps, 'select')"
                 " else eps.get('fsspec.specs', [])\n"
                 "print(','.join(e.value for e in eps if e.name == 'larder'))\n"
                 "print(larder.Client.__module__)\n")
        r = run([vpy, "-c", probe], env=env, cwd=tmp)
        path, versions, extras, fsspec_entry, _ = r.stdout.splitlines()
        assert path.startswith(venv + "/"), f"larder imported from {path}, not the virtualenv"
        installed, declared = versions.split()
        assert installed == declared
        assert extras == "fsspec,torch"
        assert fsspec_entry == "larder.fs:LarderFileSystem"
        natives = glob.glob(os.path.join(os.path.dirname(path), "_native*.so"))
        assert len(natives) == 1, natives

        # The suite's client tests (and torch's where there is torch), in this
        # interpreter, against a real cluster of the built binaries.
        tests = [os.path.join(ROOT, "python", "tests", "test_client.py")]
        has_torch = subprocess.run([vpy, "-c", "import torch"],
                                   capture_output=True).returncode == 0
        if has_torch:
            tests.append(os.path.join(ROOT, "python", "tests", "test_torch.py"))
        elif which == "debian":
            pytest.fail("Debian's python3 has no torch (scripts/install-deps.sh installs it)")
        shim = pytest_shim(vpy, tmp)
        test_env = dict(env, LARDER_CLI=os.path.abspath(
            os.environ.get("LARDER_CLI") or os.path.join(ROOT, "build", "cli", "larder")))
        if shim:
            test_env["PYTHONPATH"] = shim
        run([vpy, "-m", "pytest", "-q", "-p", "no:cacheprovider"] + tests, env=test_env,
            cwd=tmp)

        on_path = shutil.which("python3")
        if which == "path" or on_path is None or \
                real_executable(on_path) == os.path.realpath(DEBIAN):
            # A wheel, tagged for this interpreter, holding the module.
            out = os.path.join(tmp, "wheels")
            run([vpy, "-m", "pip", "wheel", "--no-index", "--no-deps", "-w", out, ROOT],
                env=env, cwd=tmp)
            tag = run([vpy, "-c", "import sys; print(f'cp{sys.version_info[0]}"
                       "{sys.version_info[1]}')"], env=env).stdout.strip()
            wheels = os.listdir(out)
            assert len(wheels) == 1 and wheels[0].startswith(f"larder-{declared}-{tag}-"), wheels
            names = zipfile.ZipFile(os.path.join(out, wheels[0])).namelist()
            assert any(n.startswith("larder/_native") for n in names), names
            assert f"larder-{declared}.dist-info/METADATA" in names
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
