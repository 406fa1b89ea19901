"""Fixtures that run the real ``tollfree serve`` process on temporary sockets.

``Server`` starts ``build/tollfree serve ARGS`` (stderr to a file), waits for its ``listening ...``
lines (docs/protocol.md, "Transports"), learns the TCP port of ``--tcp 127.0.0.1:0``, and on
``stop()`` sends SIGTERM and checks exit status 0 and that every socket file is gone.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tollfree._lib import bin_path  # noqa: E402


def deadline(seconds: float = 120.0) -> float:
    """A deadline against hangs only, never a performance bound: generous enough for an ASan build
    on a loaded 2-vCPU machine, and scaled by ``TF_TEST_DEADLINE_SCALE`` (default 1)."""
    try:
        scale = float(os.environ.get("TF_TEST_DEADLINE_SCALE", "") or 1.0)
    except ValueError:
        scale = 1.0
    return seconds * max(scale, 0.01)


# Every wait for the server, the client or a subprocess that only guards against a hang.
DEADLINE = deadline()
START_TIMEOUT = DEADLINE


def wait_until(pred, what: str, seconds: float = None, poll: float = 0.01):
    """Polls ``pred()`` until it is true; past the hang deadline fails with
    "deadline exceeded after N s waiting for WHAT"."""
    seconds = DEADLINE if seconds is None else seconds
    until = time.monotonic() + seconds
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > until:
            raise AssertionError(f"deadline exceeded after {seconds:g} s waiting for {what}")
        time.sleep(poll)


class Server:
    """One ``tollfree serve`` process. ``url(kind)`` gives unix:/tcp:/shm: URLs for its sockets."""

    def __init__(self, workdir: Path, unix=True, tcp=True, shm=True, extra=()):
        self.dir = Path(tempfile.mkdtemp(prefix="tf", dir=workdir))
        self.unix_path = str(self.dir / "u.sock") if unix else None
        self.shm_path = str(self.dir / "s.sock") if shm else None
        self.tcp_port = None
        args = [bin_path(), "serve"]
        if unix:
            args += ["--unix", self.unix_path]
        if tcp:
            args += ["--tcp", "127.0.0.1:0"]
        if shm:
            args += ["--shm", self.shm_path]
        args += list(extra)
        self.args = args
        self.log_path = self.dir / "stderr.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self._log)
        want = sum(bool(x) for x in (unix, tcp, shm))
        until = time.monotonic() + START_TIMEOUT
        while True:
            lines = [ln[ln.index("listening "):] for ln in self.log().splitlines()
                     if "listening " in ln]
            if len(lines) >= want:
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"tollfree serve exited with {self.proc.returncode}: {self.log()}")
            if time.monotonic() > until:
                self.proc.kill()
                raise RuntimeError(f"tollfree serve did not start: deadline exceeded after "
                                   f"{START_TIMEOUT:g} s: {self.log()}")
            time.sleep(0.01)
        for ln in lines:
            parts = ln.split()
            if parts[1] == "tcp":
                self.tcp_port = int(parts[2].rsplit(":", 1)[1])

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def url(self, kind: str) -> str:
        if kind == "unix":
            return f"unix:{self.unix_path}"
        if kind == "tcp":
            return f"tcp:127.0.0.1:{self.tcp_port}"
        if kind == "shm":
            return f"shm:{self.shm_path}"
        if kind == "spawn":
            return f"spawn:{bin_path()}"
        raise ValueError(kind)

    def raw(self, kind: str = "unix", timeout: float = DEADLINE) -> socket.socket:
        """A plain connected socket (for hostile and hand-written clients)."""
        if kind == "tcp":
            s = socket.create_connection(("127.0.0.1", self.tcp_port), timeout=timeout)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return s
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(self.unix_path if kind == "unix" else self.shm_path)
        return s

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout: float = DEADLINE) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"tollfree serve ignored signal {sig}: deadline exceeded after "
                                 f"{timeout:g} s: {self.log()[-2000:]}")
        self._log.close()
        return rc

    def stop_and_check(self) -> None:
        rc = self.stop()
        assert rc == 0, f"tollfree serve exited with {rc}: {self.log()[-3000:]}"
        for p in (self.unix_path, self.shm_path):
            assert p is None or not os.path.exists(p), f"socket file {p} left behind"


@pytest.fixture(scope="session")
def tf_bin() -> str:
    path = bin_path()
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not built: run 'make build' (or set TOLLFREE_BIN)")
    return path


@pytest.fixture(scope="session")
def server_factory(tf_bin, tmp_path_factory):
    """Starts servers on demand; every one still running is stopped and checked at the end."""
    made = []
    base = tmp_path_factory.mktemp("srv")

    def make(**kw) -> Server:
        s = Server(base, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        if s.proc.returncode is None:
            s.stop_and_check()


@pytest.fixture(scope="session")
def server(server_factory) -> Server:
    """One shared server with --unix, --tcp (ephemeral port) and --shm."""
    return server_factory()


@pytest.fixture(scope="session")
def default_case():
    from tollfree.data import synthetic_close
    from tollfree.grid import default_grid

    import tollfree

    close, params = synthetic_close(), default_grid()
    pnl, trades = tollfree.sweep(close, params)
    return close, params, pnl, trades


# ---- hooks ---------------------------------------------------------------------------------

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A timeout that escapes a test is a hang guard firing: say so, with the deadline."""
    outcome = yield
    rep = outcome.get_result()
    if call.excinfo is None or rep.passed:
        return
    exc = call.excinfo.value
    if isinstance(exc, subprocess.TimeoutExpired):
        secs = exc.timeout
    elif isinstance(exc, (TimeoutError, socket.timeout)):
        secs = getattr(exc, "timeout", None) or DEADLINE
    else:
        return
    rep.sections.append(("deadline", f"deadline exceeded after {secs:g} s (a guard against "
                                     "hangs; TF_TEST_DEADLINE_SCALE scales it)"))


def isa_paths_not_run() -> list[str]:
    """One line per SIMD path the gate could not force on this CPU, with the reason."""
    try:
        from tollfree import binding
    except Exception as e:  # the library is not built: the tests say so themselves
        return [f"gate: ISA paths unknown ({e})"]
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), [])
    except OSError:
        flags = []
    cap = os.environ.get("TF_ISA_MAX")
    out = []
    for isa, label, flag in (("scalar", "scalar", None), ("sse2", "SSE2", "sse2"),
                             ("avx2", "AVX2", "avx2"), ("avx512", "AVX-512", "avx512f")):
        if binding.isa_supported(isa):
            continue
        why = f"capped by TF_ISA_MAX={cap}" if cap and flag in flags else f"no {flag}"
        out.append(f"gate: {label} path not exercised on this CPU ({why})")
    return out


_gate_collected = []


def pytest_collection_finish(session):
    _gate_collected[:] = [i for i in session.items if "test_kernel_gate" in i.nodeid]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """A green run on an AVX2-only CPU says plainly that the AVX-512 path was not run."""
    if not _gate_collected:
        return
    lines = isa_paths_not_run()
    terminalreporter.section("ISA paths")
    for ln in lines or ["gate: every ISA path exercised (scalar, SSE2, AVX2, AVX-512)"]:
        terminalreporter.write_line(ln)
