"""Venue sessions from Python (docs/venue.md): `tollfree engine serve --sessions FILE` and
`tollfree.orders.connect(url, session=..., secret=...)` over a real Unix socket.

Logon (a good secret, from the argument or TOLLFREE_SECRET; a wrong secret and an unknown name
refused alike), a command before logon closing the connection, NotAuthorized for another
session's account, another session's order answered as one that does not exist, and a command
dropped before its ack and resent with the same client_seq (after a reconnect and after a
restart) answered with its original events and applied once. Deadlines only guard against hangs.
"""
from __future__ import annotations

import hashlib
import hmac
import re
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from conftest import DEADLINE
from engine_service import VenueProcess
from tollfree import orders
from tollfree._lib import bin_path
from tollfree.errors import EngineServiceError

SECRET_A = "alpha-secret-0123456789"
SECRET_B = "bravo-secret-9876543210"


class Venue(VenueProcess):
    def __init__(self, d: Path):
        super().__init__(d, f"# two sessions\nalpha {SECRET_A} 1,2\nbravo {SECRET_B} 3\n"
                            f"paper {SECRET_A} 1,2,3\n")


@pytest.fixture()
def venue(tmp_path):
    v = Venue(tmp_path)
    v.start()
    yield v
    if v.proc.poll() is None:
        v.proc.kill()
        v.proc.wait()


def test_logon(venue, monkeypatch):
    with orders.connect(venue.url, session="alpha", secret=SECRET_A, timeout=DEADLINE) as c:
        assert c.logon_client_seq == 0 and c.next_client_seq == 1
    monkeypatch.setenv("TOLLFREE_SECRET", SECRET_B)
    with orders.connect(venue.url, session="bravo", timeout=DEADLINE) as c:
        assert c.new_limit(3, 1, 1, "buy", 100, 1)[0].KIND == orders.Accepted.KIND
    codes = []
    for name, secret in (("alpha", SECRET_B), ("nobody", SECRET_A)):
        with pytest.raises(EngineServiceError) as ei:
            orders.connect(venue.url, session=name, secret=secret, timeout=DEADLINE)
        codes.append((ei.value.code, "logon refused" in str(ei.value)))
    assert codes[0] == codes[1] == (-13, True)  # the same answer: -EACCES
    with orders.connect(venue.url, timeout=DEADLINE) as plain:  # no logon
        with pytest.raises(EngineServiceError):
            plain.new_limit(1, 1, 1, "buy", 100, 1)
    until = time.monotonic() + DEADLINE
    while "a frame before logon" not in venue.log() and time.monotonic() < until:
        time.sleep(0.01)
    assert "a frame before logon" in venue.log()
    assert SECRET_A not in venue.log() and SECRET_B not in venue.log()


def test_authorization(venue):
    a = orders.connect(venue.url, session="alpha", secret=SECRET_A, timeout=DEADLINE)
    b = orders.connect(venue.url, session="bravo", secret=SECRET_B, timeout=DEADLINE)
    r = a.new_limit(3, 11, 1, "buy", 100, 1)[0]
    assert isinstance(r, orders.VenueRejected) and r.reason_name == "NotAuthorized"
    assert r.client_order_id == 11 and r.command_seq > 0
    oid = a.new_limit(1, 12, 1, "buy", 100, 1)[0].order_id
    theirs, none = b.cancel(oid)[0], b.cancel(10 ** 9)[0]
    assert type(theirs) is type(none) is orders.Rejected
    assert theirs.reason == none.reason == 2 and theirs.client_order_id == none.client_order_id
    assert b.replace(oid, 13, 101, 1)[0].reason_name == "OrderNotFound"
    assert isinstance(a.cancel(oid)[0], orders.Canceled)
    a.close()
    b.close()


def _send_and_drop(venue: Venue, client_seq: int, cmd) -> None:
    """Logs on over a raw socket, sends one Keyed command, closes before the ack."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(DEADLINE)
    s.connect(venue.sock)
    ch = b""
    while len(ch) < 40:
        ch += s.recv(40 - len(ch))
    mac = hmac.new(SECRET_A.encode(), b"tollfree-venue-logon-v1" + ch[8:40] + b"alpha",
                   hashlib.sha256).digest()
    body = bytes([2, 5]) + b"alpha" + mac
    s.sendall(struct.pack("<H", len(body)) + body)
    res = b""
    while len(res) < 20:
        res += s.recv(20 - len(res))
    assert res[3] == 0
    s.sendall(orders.encode_keyed(cmd, client_seq))
    s.close()


def test_resend_applied_once(venue):
    before = venue.stop()
    venue.start()
    cmd = orders.NewLimit(1, 700, 1, orders.BUY, 150, 4)
    _send_and_drop(venue, 40, cmd)
    with orders.connect(venue.url, session="alpha", secret=SECRET_A, timeout=DEADLINE) as c:
        assert c.logon_client_seq >= 40
        first = c.call(cmd, client_seq=40)
        again = c.call(cmd, client_seq=40)
        assert first == again and first.command_seq == again.command_seq
        assert isinstance(first[0], orders.Accepted) and first[0].client_order_id == 700
        stale = c.call(orders.NewLimit(1, 701, 1, orders.BUY, 150, 4), client_seq=3)
        assert stale.command_seq == 0 and stale[0].reason_name == "StaleClientSeq"
    once = venue.stop()
    assert once["commands"] == before["commands"] + 1  # journaled once, never again
    venue.start()
    with orders.connect(venue.url, session="alpha", secret=SECRET_A, timeout=DEADLINE) as c:
        assert c.call(cmd, client_seq=40) == first  # read back after the restart
        assert c.next_client_seq == 41
    assert venue.stop()["state_hash"] == once["state_hash"]
    run = subprocess.run([bin_path(), "engine", "run", str(venue.dir / "j" / "commands.ofl"),
                          "--quiet"], capture_output=True, text=True, timeout=DEADLINE)
    assert run.returncode == 0 and once["state_hash"] in run.stdout


def test_refusals(tmp_path):
    v = Venue(tmp_path)
    v.sessions.chmod(0o644)
    p = subprocess.run([bin_path(), "engine", "serve", "--journal", str(tmp_path / "j"),
                        "--unix", v.sock, "--sessions", str(v.sessions)],
                       capture_output=True, text=True, timeout=DEADLINE)
    assert p.returncode == 1 and "chmod 600" in p.stderr and str(v.sessions) in p.stderr
    v.sessions.write_text("alpha tooshort 1\n")
    v.sessions.chmod(0o600)
    p = subprocess.run([bin_path(), "engine", "serve", "--journal", str(tmp_path / "j"),
                        "--unix", v.sock, "--sessions", str(v.sessions)],
                       capture_output=True, text=True, timeout=DEADLINE)
    assert p.returncode == 1 and re.search(r"line 1: .*secret", p.stderr), p.stderr
    p = subprocess.run([bin_path(), "engine", "serve", "--journal", str(tmp_path / "j"),
                        "--tcp", "0.0.0.0:0"], capture_output=True, text=True, timeout=DEADLINE)
    assert p.returncode == 2 and "not a loopback address" in p.stderr


def test_paper_session(venue, tmp_path):
    import numpy as np

    from tollfree import paper

    close = 100.0 + np.cumsum(np.sin(np.arange(400) / 7.0))
    r = paper.run((6, 3, 2, 3, 1, 2), close, engine=venue.url, session="paper", secret=SECRET_A,
                  progress=False)
    assert r.parity and r.orders > 0
    secret = tmp_path / "secret"
    secret.write_text(SECRET_B + "\n")
    secret.chmod(0o644)
    p = subprocess.run([bin_path(), "paper", "--combo", "6,3,2,3,1,2", "--engine", venue.url,
                        "--session", "paper", "--secret-file", str(secret), "--quiet"],
                       capture_output=True, text=True, timeout=DEADLINE)
    assert p.returncode == 2 and "chmod 600" in p.stderr
    secret.chmod(0o600)  # the wrong secret: refused, and said so
    p = subprocess.run([bin_path(), "paper", "--combo", "6,3,2,3,1,2", "--engine", venue.url,
                        "--session", "paper", "--secret-file", str(secret), "--quiet"],
                       capture_output=True, text=True, timeout=DEADLINE)
    assert p.returncode != 0 and "logon as session paper refused" in p.stderr
