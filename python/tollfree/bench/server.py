"""Starting, pinning and stopping the engine server (``tollfree serve``) for the benchmarks.

One server process serves unix, tcp and shm at once; its start-up time (exec to every listener
ready) is measured on its own row and never folded into steady-state figures.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from tollfree.bench import harness as H

_PORT = re.compile(r"listening tcp [\d.]+:(\d+)")


def server_binary() -> str:
    from tollfree import _lib
    return _lib.bin_path()


class Server:
    """``tollfree serve --unix DIR/engine.sock --tcp 127.0.0.1:0 --shm DIR/engine.shm``."""

    def __init__(self, extra_args=(), transports=("unix", "tcp", "shm"), cpus=None):
        self.extra_args = list(extra_args)
        self.transports = tuple(transports)
        self.cpus = cpus
        self.dir = Path(tempfile.mkdtemp(prefix="tollfree-bench-"))
        self.unix_path = str(self.dir / "engine.sock")
        self.shm_path = str(self.dir / "engine.shm")
        self.port = None
        self.proc = None
        self.stderr_lines: list[str] = []
        self.startup_s = None

    # -- life cycle ------------------------------------------------------------------------------

    def start(self, timeout: float = 15.0) -> "Server":
        exe = server_binary()
        if not os.path.exists(exe):
            raise H.Unavailable(f"{exe} not built")
        args = [exe, "serve"]
        if "unix" in self.transports:
            args += ["--unix", self.unix_path]
        if "tcp" in self.transports:
            args += ["--tcp", "127.0.0.1:0"]
        if "shm" in self.transports:
            args += ["--shm", self.shm_path]
        args += self.extra_args
        if self.cpus:
            args = ["taskset", "-c", ",".join(map(str, sorted(self.cpus)))] + args
        for p in (self.unix_path, self.shm_path):
            if os.path.exists(p):
                os.unlink(p)
        got_port = threading.Event()
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)

        def drain():
            for line in self.proc.stderr:
                self.stderr_lines.append(line.rstrip())
                m = _PORT.search(line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    got_port.set()
        threading.Thread(target=drain, daemon=True).start()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                time.sleep(0.05)
                err = " | ".join(self.stderr_lines[-3:]) or f"exit {self.proc.returncode}"
                self.proc = None
                if "not built" in err:
                    raise H.Unavailable(err)
                raise RuntimeError(f"tollfree serve exited {' '.join(args[1:])}: {err}")
            ready = ("tcp" not in self.transports or got_port.is_set()) and \
                all(self._connectable(p) for t, p in (("unix", self.unix_path),
                                                       ("shm", self.shm_path))
                    if t in self.transports)
            if ready:
                break
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"tollfree serve not ready after {timeout:.0f} s: "
                                   + " | ".join(self.stderr_lines[-3:]))
            time.sleep(0.0005)
        self.startup_s = time.perf_counter() - t0
        return self

    @staticmethod
    def _connectable(path: str) -> bool:
        if not os.path.exists(path):
            return False
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return True
        except OSError:
            return False
        finally:
            s.close()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- placement -------------------------------------------------------------------------------

    def pin(self, cpu_set) -> None:
        """Pins every thread of the server (later threads inherit the pinning)."""
        if self.proc is not None:
            H.pin_process(self.proc.pid, cpu_set)

    def cpu_time_s(self) -> float:
        """CPU seconds the server has used (user + system), from /proc."""
        if self.proc is None:
            return 0.0
        try:
            f = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
            return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            return 0.0

    # -- addresses -------------------------------------------------------------------------------

    def url(self, transport: str) -> str:
        if transport == "unix":
            return f"unix:{self.unix_path}"
        if transport == "tcp":
            return f"tcp:127.0.0.1:{self.port}"
        if transport == "shm":
            return f"shm:{self.shm_path}"
        raise ValueError(transport)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.cleanup()
