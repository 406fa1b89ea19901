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

START_TIMEOUT = 15.0


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
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            lines = [ln[ln.index("listening "):] for ln in self.log().splitlines()
                     if "listening " in ln]
            if len(lines) >= want:
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"tollfree serve exited with {self.proc.returncode}: {self.log()}")
            if time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError(f"tollfree serve did not start: {self.log()}")
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

    def raw(self, kind: str = "unix", timeout: float = 10.0) -> socket.socket:
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

    def stop(self, sig=signal.SIGTERM, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"tollfree serve ignored signal {sig}: {self.log()[-2000:]}")
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
