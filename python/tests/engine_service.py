"""A `tollfree engine serve` process for the order-client and paper tests (one per test module).

Skipped, with the reason, only while the binary's ``engine serve`` still says "not built yet".
The listening lines are read from stderr ("listening unix PATH", "listening tcp HOST:PORT").
"""
from __future__ import annotations

import json
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import DEADLINE
from tollfree._lib import bin_path


def service_available() -> tuple[bool, str]:
    try:
        p = subprocess.run([bin_path(), "engine", "serve", "--help"], capture_output=True,
                           text=True, timeout=DEADLINE)
    except OSError as e:
        return False, f"{bin_path()}: {e}"
    out = p.stdout + p.stderr
    if "not built yet" in out or "--journal" not in out:
        return False, f"`{bin_path()} engine serve` is not built yet ({out.strip()[:80]!r})"
    return True, ""


class EngineService:
    def __init__(self, workdir: Path, instruments: str = "1-4", durability: str = "group"):
        self.dir = Path(tempfile.mkdtemp(prefix="eng", dir=workdir))
        self.journal = self.dir / "j"
        self.sock = str(self.dir / "e.sock")
        self.instruments = instruments
        self.log_path = self.dir / "stderr.log"
        self.out_path = self.dir / "stdout.log"
        self._log = open(self.log_path, "wb")
        self._out = open(self.out_path, "wb")
        self.proc = subprocess.Popen(
            [bin_path(), "engine", "serve", "--journal", str(self.journal), "--instruments",
             instruments, "--unix", self.sock, "--tcp", "127.0.0.1:0", "--durability", durability],
            stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._log)
        self.tcp_port = None
        until = time.monotonic() + DEADLINE
        while True:
            log = self.log()
            m = re.search(r"listening tcp \S*?:(\d+)", log)
            if m and "listening unix" in log:
                self.tcp_port = int(m.group(1))
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"engine serve exited with {self.proc.returncode}: {log}")
            if time.monotonic() > until:
                self.proc.kill()
                raise RuntimeError(f"engine serve did not start: deadline exceeded after "
                                   f"{DEADLINE:g} s: {log}")
            time.sleep(0.01)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def url(self, kind: str) -> str:
        return f"unix:{self.sock}" if kind == "unix" else f"tcp:127.0.0.1:{self.tcp_port}"

    def stop(self) -> dict:
        """SIGTERM; returns its one JSON line (commands, events, last_command_seq, state_hash)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"engine serve ignored SIGTERM: {self.log()[-2000:]}")
        self._log.close()
        self._out.close()
        assert rc == 0, f"engine serve exited with {rc}: {self.log()[-2000:]}"
        lines = [ln for ln in self.out_path.read_text().splitlines() if ln.strip()]
        return json.loads(lines[-1]) if lines else {}

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
        self._out.close()


def engine_service(tmp_path_factory, **kw):
    ok, why = service_available()
    if not ok:
        pytest.skip(why)
    return EngineService(tmp_path_factory.mktemp("engine"), **kw)


class VenueProcess:
    """`engine serve --sessions` on a Unix socket in directory ``d`` (the venue tests): the
    sessions file (mode 600) from ``sessions`` text, more options per start; restartable on the
    same journal."""

    def __init__(self, d: Path, sessions: str, *options: str, secrets: dict | None = None):
        self.dir = d
        self.secrets = secrets or {}
        self.sessions = d / "sessions"
        self.sessions.write_text(sessions)
        self.sessions.chmod(0o600)
        self.options = options
        self.sock = str(d / "e.sock")
        self.url = f"unix:{self.sock}"
        self.proc = None

    def connect(self, name: str):
        """A logged-on client of session ``name`` (its secret from ``secrets``)."""
        from tollfree import orders
        return orders.connect(self.url, session=name, secret=self.secrets[name],
                              timeout=DEADLINE)

    def start(self, *extra: str) -> None:
        self.log_path = self.dir / "log"
        self.out_path = self.dir / "out"
        with open(self.log_path, "wb") as log, open(self.out_path, "wb") as out:
            self.proc = subprocess.Popen(
                [bin_path(), "engine", "serve", "--journal", str(self.dir / "j"), "--unix",
                 self.sock, "--sessions", str(self.sessions), *self.options, "--instruments",
                 "1-4", *extra],
                stdin=subprocess.DEVNULL, stdout=out, stderr=log)
        self.wait_log("listening unix")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_log(self, text: str, count: int = 1) -> None:
        until = time.monotonic() + DEADLINE
        while self.log().count(text) < count:
            assert self.proc.poll() is None, self.log()
            assert time.monotonic() < until, self.log()
            time.sleep(0.01)

    def stop(self) -> dict:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(DEADLINE) == 0, self.log()
        return json.loads(self.out_path.read_text().strip().splitlines()[-1])

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
