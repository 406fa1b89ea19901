"""`make install PREFIX=...` and `pip install .` used as a user would: both into temporary
prefixes, then a C program built with pkg-config against the installed library and run with no
LD_LIBRARY_PATH (tollfree.pc's rpath), the installed CLI (with --report), and from a venv outside
the tree with no environment variables: the package imported and pip's `tollfree` command (the
C program shipped in the package). The pip build reuses build-pip/ (CMake), so only the first
run compiles."""
import os
import subprocess
import time
from pathlib import Path

import pytest

from tollfree._lib import bin_path
from conftest import DEADLINE  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CLEAN = {k: v for k, v in os.environ.items()
         if k not in ("PYTHONPATH", "TOLLFREE_LIB", "TOLLFREE_BIN", "LD_LIBRARY_PATH")}


def sh(*cmd, env=None, cwd=None, timeout=DEADLINE * 5):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env or CLEAN,
                       cwd=cwd, timeout=timeout)
    assert r.returncode == 0, f"{cmd}: {r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r


def build_dir() -> Path:
    d = Path(bin_path()).resolve().parent
    if not (d / "CMakeCache.txt").exists():
        pytest.skip(f"{d} is not a CMake build directory")
    return d


def assert_interactive_report(path):
    """The installed report inlines the charting library `make web` vendored (license kept)."""
    page = path.read_text(encoding="utf-8")
    assert "/*! uPlot " in page and "Permission is hereby granted" in page, page[:400]
    assert "data:image/png" not in page and page.count("<script") == 3


def test_make_install_and_pkg_config(tmp_path):
    prefix = tmp_path / "prefix"
    # The Makefile's target, on the build these tests run against (up to date: no rebuild).
    sh("make", "-C", ROOT, "install", f"BUILD={build_dir()}", f"PREFIX={prefix}")
    lib = prefix / "lib"
    real = lib / "libtollfree.so.0.3.0"
    assert real.is_file() and os.readlink(lib / "libtollfree.so.0.3") == real.name
    assert os.readlink(lib / "libtollfree.so") == "libtollfree.so.0.3"
    assert "SONAME               libtollfree.so.0.3\n" in sh("objdump", "-p", real).stdout
    for f in ("bin/tollfree", "include/tollfree/kernel.h", "include/tollfree/client.h",
              "lib/pkgconfig/tollfree.pc", "share/doc/tollfree/README.md",
              "share/doc/tollfree/definition.md", "share/tollfree/python/tollfree/__init__.py"):
        assert (prefix / f).exists(), f

    env = dict(CLEAN, PKG_CONFIG_PATH=str(lib / "pkgconfig"))
    flags = sh("pkg-config", "--cflags", "--libs", "tollfree", env=env).stdout.split()
    assert "-ltollfree" in flags
    rpath = [f for f in flags if f.startswith("-Wl,-rpath,")]
    assert [Path(f[len("-Wl,-rpath,"):]).resolve() for f in rpath] == [lib]
    assert [Path(f[2:]).resolve() for f in flags if f.startswith("-I")] == [prefix / "include"]
    exe = tmp_path / "client_example"
    sh("cc", ROOT / "examples" / "client_example.c", "-o", exe, *flags, env=env)

    # The installed CLI serves; the example, linked to the installed .so, talks to it. No
    # LD_LIBRARY_PATH: the rpath from tollfree.pc finds the library.
    run_env = CLEAN
    assert "not found" not in sh("ldd", exe, env=run_env).stdout
    sock = tmp_path / "tf.sock"
    srv = subprocess.Popen([prefix / "bin" / "tollfree", "serve", "--unix", sock, "--quiet"],
                           env=CLEAN, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        until = time.monotonic() + DEADLINE
        while not sock.exists():
            assert srv.poll() is None and time.monotonic() < until, "serve did not start"
            time.sleep(0.02)
        out = sh(exe, f"unix:{sock}", env=run_env).stdout
        assert "server: protocol v" in out
    finally:
        srv.terminate()
        srv.wait(timeout=DEADLINE)

    # The installed CLI on its own, with the report (package and library found beside it).
    out = sh(prefix / "bin" / "tollfree", "sweep", "--top", "3", "--quiet",
             "--report", tmp_path / "r.html", cwd=tmp_path).stdout
    assert out.splitlines()[0].startswith("L,half,sq,p,p3,p2,pnl,trades,wins,")
    assert len(out.splitlines()) == 4
    assert_interactive_report(tmp_path / "r.html")


def test_pip_install_into_a_venv(tmp_path):
    venv = tmp_path / "venv"
    # Debian's interpreter, as the README says: the numpy it needs is Debian's.
    sh("/usr/bin/python3", "-m", "venv", "--system-site-packages", venv)
    sh(venv / "bin" / "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
       "--quiet", ROOT, cwd=tmp_path)
    code = ("import tollfree, numpy as np\n"
            "from tollfree import data, grid\n"
            "assert 'site-packages' in tollfree.__file__, tollfree.__file__\n"
            "p, t = tollfree.sweep(data.default_close(), grid.default_grid())\n"
            "print(f'{p[0]:.2f} {t[0]}')\n")
    out = sh(venv / "bin" / "python", "-c", code, cwd=tmp_path).stdout
    assert out.split() == ["-5165.58", "57029"]
    code = ("import importlib.metadata as m, tollfree\n"
            "print(tollfree.__version__, m.version('tollfree'))\n")
    a, b = sh(venv / "bin" / "python", "-c", code, cwd=tmp_path).stdout.split()
    assert a == b

    # pip's `tollfree` command runs the C program shipped in the package, with the venv's
    # Python for --report; PATH holds no other tollfree.
    env = dict(CLEAN, PATH=f"{venv / 'bin'}:/usr/bin:/bin")
    cli = venv / "bin" / "tollfree"
    assert sh(cli, "--version", env=env, cwd=tmp_path).stdout.split() == ["tollfree", a]
    out = sh(cli, "sweep", "--top", "3", "--quiet", "--report", tmp_path / "r.html", env=env,
             cwd=tmp_path).stdout
    assert out.splitlines()[0].startswith("L,half,sq,p,p3,p2,pnl,trades,wins,")
    assert_interactive_report(tmp_path / "r.html")
    r = subprocess.run([venv / "bin" / "python", "-m", "tollfree", "--version"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=DEADLINE)
    assert r.returncode == 0 and r.stdout.split() == ["tollfree", a]

    # Without the program, the command says what to do (and never runs itself).
    shipped = sh(venv / "bin" / "python", "-c", "from tollfree._lib import bin_path; "
                 "print(bin_path())", env=env, cwd=tmp_path).stdout.strip()
    assert Path(shipped).parent.name == "bin" and "site-packages" in shipped
    os.remove(shipped)
    r = subprocess.run([cli, "--version"], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=DEADLINE)
    assert r.returncode == 127, r
    assert "the C program is not installed" in r.stderr
    assert "pip install --no-build-isolation ." in r.stderr and "TOLLFREE_BIN" in r.stderr
