"""`tollfree serve` start and stop: --help, socket file mode, live vs stale sockets, signals."""
from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import threading

import numpy as np
import pytest

import tollfree
from conftest import DEADLINE  # noqa: E402


def test_help(tf_bin):
    r = subprocess.run([tf_bin, "serve", "--help"], capture_output=True, timeout=DEADLINE, text=True)
    assert r.returncode == 0
    text = r.stdout + r.stderr
    for flag in ("--unix", "--tcp", "--stdio", "--shm", "--threads", "--max-frame", "--max-datasets"):
        assert flag in text, flag


def test_bad_arguments_fail_cleanly(tf_bin, tmp_path):
    # Usage errors exit 2; an address that does not resolve is found when listening: 1.
    for args, code in ((["--tcp", "127.0.0.1:notaport"], 1), (["--max-frame", "-5"], 2),
                       (["--threads", "x"], 2), (["--bogus"], 2), ([], 2)):
        r = subprocess.run([tf_bin, "serve", *args], capture_output=True, timeout=DEADLINE,
                           stdin=subprocess.DEVNULL, text=True)
        assert r.returncode == code, (args, r.returncode, r.stderr)
        assert r.stderr.startswith("tollfree serve: "), (args, r.stderr)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_stop_cleanly(server_factory, sig):
    srv = server_factory()
    assert stat.S_IMODE(os.stat(srv.unix_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(srv.shm_path).st_mode) == 0o600
    assert stat.S_ISSOCK(os.stat(srv.unix_path).st_mode)
    c = tollfree.connect(srv.url("unix"))
    s = tollfree.connect(srv.url("shm"))
    c.echo(np.ones(3))
    s.session([5, 3, 2, 3, 1, 2]).on_bar(1.0)
    assert srv.stop(sig) == 0, srv.log()[-2000:]
    assert not os.path.exists(srv.unix_path) and not os.path.exists(srv.shm_path)
    with pytest.raises(tollfree.SweepError):
        c.echo(np.ones(3))
    with pytest.raises(tollfree.SweepError):
        s.echo(np.ones(3))
    c.close()
    s.close()


def test_sigterm_during_a_sweep(server_factory, default_case):
    close, params, pnl, trades = default_case
    srv = server_factory(tcp=False, shm=False)
    big = np.ascontiguousarray(np.tile(params, (10, 1)))
    box = {}

    def call():
        try:
            with tollfree.connect(srv.url("unix"), timeout=DEADLINE) as c:
                box["r"] = c.sweep(close, big)
        except tollfree.SweepError as e:
            box["e"] = e

    th = threading.Thread(target=call)
    th.start()
    import time

    time.sleep(0.2)
    srv.stop_and_check()
    th.join(DEADLINE)
    assert not th.is_alive(), f"deadline exceeded after {DEADLINE:g} s: the sweep never ended"
    # either the sweep finished before the shutdown ("finish running requests"), or the client
    # got a clean error; never a wrong answer
    if "r" in box:
        assert np.array_equal(box["r"][1][:80], trades)
    else:
        assert box["e"].code < 0


def test_refuses_a_live_socket_and_replaces_a_stale_one(server_factory, tf_bin, tmp_path):
    srv = server_factory(tcp=False, shm=False)
    r = subprocess.run([tf_bin, "serve", "--unix", srv.unix_path], capture_output=True,
                       timeout=DEADLINE, stdin=subprocess.DEVNULL)
    assert r.returncode == 1
    with tollfree.connect(srv.url("unix")) as c:  # the first server is untouched
        assert c.hello()["version"] == 2
    srv.stop_and_check()

    stale = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(stale))
    s.close()  # a socket file nobody accepts on
    assert stale.exists()
    p = subprocess.Popen([tf_bin, "serve", "--unix", str(stale)], stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    try:
        lines = []
        while not any("listening unix" in ln for ln in lines):
            ln = p.stderr.readline().decode()
            assert ln, lines
            lines.append(ln)
        with tollfree.connect(f"unix:{stale}") as c:
            assert c.hello()["version"] == 2
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(15) == 0
    assert not stale.exists()

    plain = tmp_path / "not-a-socket"
    plain.write_text("keep me")
    r = subprocess.run([tf_bin, "serve", "--unix", str(plain)], capture_output=True, timeout=DEADLINE,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and plain.read_text() == "keep me"


def test_stdio_exits_zero_at_eof(tf_bin):
    r = subprocess.run([tf_bin, "serve", "--stdio"], input=b"", capture_output=True, timeout=DEADLINE)
    assert r.returncode == 0 and r.stdout == b""
    # a truncated request then EOF: no reply, still a clean exit
    r = subprocess.run([tf_bin, "serve", "--stdio"], input=b"\x10\x00\x00\x00\x10\x02",
                       capture_output=True, timeout=DEADLINE)
    assert r.returncode == 0


def test_several_servers_and_many_transports(server_factory, tmp_path):
    a = server_factory()
    b = server_factory(unix=True, tcp=True, shm=False)
    for srv in (a, b):
        with tollfree.connect(srv.url("tcp")) as c:
            assert c.hello()["version"] == 2
    b.stop_and_check()
    a.stop_and_check()
