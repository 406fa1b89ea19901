"""TLS on the venue from Python (docs/venue.md, "TLS"): `tollfree engine serve --tls-cert
--tls-key` and `tollfree.orders.connect("tls:HOST:PORT", ca=...)` over real sockets, with a test CA
and a server certificate (localhost, 127.0.0.1) made here by the openssl command.

The tls: URL vectors (tests/vectors/urls_tls.txt, the C client's too); logon and orders over TLS
(by address and by name, a fill to another session, a pipeline); `tollfree paper --engine
tls://...`; the Unix socket of the same service stays plain; a wrong CA refused by the client (the CA from TOLLFREE_TLS_CA too); a plain
TCP client on the TLS port cut off while a TLS client is served; a handshake that stalls cut off by
the stall timer while a TLS client is served; the start-up refusals (a non-loopback address
without TLS, a key file of mode 644). Deadlines only guard against hangs.
"""
from __future__ import annotations

import errno
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import DEADLINE
from engine_service import VenueProcess
from tollfree import orders
from tollfree._lib import bin_path
from tollfree.client import parse_url as sweep_parse_url
from tollfree.errors import EngineServiceError

SECRET_A = "alpha-secret-0123456789"
SECRET_B = "bravo-secret-9876543210"
VECTORS = Path(__file__).resolve().parents[2] / "tests" / "vectors" / "urls_tls.txt"

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="the openssl command is needed (Debian: openssl)")


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True,
                   timeout=DEADLINE)


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("tls")
    ca_args = ["-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
               "-days", "2", "-addext", "basicConstraints=critical,CA:TRUE",
               "-addext", "keyUsage=critical,keyCertSign"]
    _openssl("req", *ca_args, "-keyout", "ca.key", "-out", "ca.pem", "-subj",
             "/CN=tollfree-test-ca", cwd=d)
    _openssl("req", *ca_args, "-keyout", "other.key", "-out", "other.pem", "-subj",
             "/CN=tollfree-other-ca", cwd=d)
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost", cwd=d)
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                               "basicConstraints=CA:FALSE\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf", cwd=d)
    (d / "server.key").chmod(0o600)
    return {"dir": d, "ca": str(d / "ca.pem"), "other": str(d / "other.pem"),
            "cert": str(d / "server.pem"), "key": str(d / "server.key")}


class TlsVenue(VenueProcess):
    def __init__(self, d: Path, certs: dict):
        super().__init__(d, f"alpha {SECRET_A} 1,2\nbravo {SECRET_B} 3\n",
                         "--tcp", "127.0.0.1:0", "--tls-cert", certs["cert"], "--tls-key",
                         certs["key"], "--stall-timeout", "2")
        self.ca = certs["ca"]

    def start(self, *extra: str) -> None:
        super().start(*extra)
        self.wait_log("listening tcp")
        m = re.search(r"listening tcp 127\.0\.0\.1:(\d+) \(TLS\)", self.log())
        assert m, self.log()
        self.port = int(m.group(1))
        self.tls_url = f"tls:127.0.0.1:{self.port}"


@pytest.fixture()
def venue(tmp_path, certs):
    v = TlsVenue(tmp_path, certs)
    v.start()
    yield v
    if v.proc.poll() is None:
        v.proc.kill()
        v.proc.wait()


def _served(v: TlsVenue, cid: int) -> bool:
    with orders.connect(v.tls_url, session="alpha", secret=SECRET_A, ca=v.ca,
                        timeout=DEADLINE) as c:
        return c.new_limit(1, cid, 2, "buy", 50, 1)[0].KIND == orders.Accepted.KIND


def _cut_off(s: socket.socket) -> bool:
    """Reads until the service ends the connection (EOF or a reset) or the deadline passes."""
    s.settimeout(DEADLINE)
    try:
        while s.recv(4096):
            pass
    except ConnectionResetError:
        pass
    except socket.timeout:
        return False
    return True


def _vectors():
    return [ln.split(" ") for ln in VECTORS.read_text().splitlines()
            if ln and not ln.startswith("#")]


@pytest.mark.parametrize("vec", _vectors(), ids=lambda v: v[1])
def test_url_vectors(vec):
    with pytest.raises(ValueError):
        sweep_parse_url(vec[1])  # the sweep service has no TLS
    if vec[0] == "bad":
        with pytest.raises(ValueError):
            orders.parse_url(vec[1])
        return
    fam = socket.AF_INET6 if ":" in vec[3] else socket.AF_INET
    assert orders.parse_url(vec[1]) == (fam, (vec[3], int(vec[4])))


def test_orders_over_tls(venue):
    a = orders.connect(venue.tls_url, session="alpha", secret=SECRET_A, ca=venue.ca,
                       timeout=DEADLINE)
    b = orders.connect(f"tls://localhost:{venue.port}", session="bravo", secret=SECRET_B,
                       ca=venue.ca, timeout=DEADLINE)
    with a, b:
        r = a.new_limit(1, 10, 1, "sell", 1000, 3)
        assert r[0].KIND == orders.Accepted.KIND
        maker = r[0].order_id
        r = b.new_limit(3, 20, 1, "buy", 1000, 2)
        assert [m.KIND for m in r] == [orders.Accepted.KIND, orders.Trade.KIND]
        assert r[1].maker_order_id == maker
        fills = a.fills(timeout=DEADLINE)
        assert [f.maker_order_id for f in fills] == [maker]
        assert b.new_limit(1, 21, 1, "buy", 900, 1)[0].KIND == orders.VenueRejected.KIND
        cmds = [orders.NewLimit(2, 100 + i, 3, 1, 10 + i % 50, 1) for i in range(2000)]
        replies = a.send_many(cmds)
        assert len(replies) == 2000
        assert all(rep[0].KIND == orders.Accepted.KIND for rep in replies)
        seqs = [rep.command_seq for rep in replies]
        assert seqs == list(range(seqs[0], seqs[0] + 2000))
    # The Unix socket of the same service stays plain.
    with orders.connect(venue.url, session="alpha", secret=SECRET_A, timeout=DEADLINE) as c:
        assert c.new_limit(1, 30, 1, "buy", 1, 1)[0].KIND == orders.Accepted.KIND


def test_paper_over_tls(venue, tmp_path):
    """`tollfree paper --engine tls://...` (the C client's dialer; the CA from TOLLFREE_TLS_CA):
    the same pnl as the sweep, bit for bit (paper's own parity check, its exit status)."""
    import math
    import os
    import struct
    data = tmp_path / "closes.f64"
    data.write_bytes(b"".join(struct.pack("<d", 100 + 10 * math.sin(i / 37) + 0.01 * i)
                              for i in range(3000)))
    env = dict(os.environ, TOLLFREE_TLS_CA=venue.ca, TOLLFREE_SECRET=SECRET_A)
    p = subprocess.run([bin_path(), "paper", "--combo", "6,3,2,3,1,2", "--input", str(data),
                        "--engine", f"tls://localhost:{venue.port}", "--session", "alpha"],
                       capture_output=True, text=True, timeout=DEADLINE, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "parity against the rounded series: yes (bit for bit)" in p.stdout, p.stdout
    env.pop("TOLLFREE_TLS_CA")
    p = subprocess.run([bin_path(), "paper", "--combo", "6,3,2,3,1,2", "--input", str(data),
                        "--engine", f"tls://localhost:{venue.port}", "--session", "alpha"],
                       capture_output=True, text=True, timeout=DEADLINE, env=env)
    assert p.returncode != 0 and "Protocol error" in p.stderr, p.stdout + p.stderr


def test_wrong_ca_refused(venue, certs, monkeypatch):
    monkeypatch.delenv("TOLLFREE_TLS_CA", raising=False)
    for ca in (certs["other"], None):  # another CA; the system store
        with pytest.raises(EngineServiceError) as ei:
            orders.connect(venue.tls_url, ca=ca, timeout=DEADLINE)
        assert ei.value.code == -errno.EPROTO
        assert "TLS handshake" in str(ei.value)
    monkeypatch.setenv("TOLLFREE_TLS_CA", certs["ca"])
    with orders.connect(venue.tls_url, session="alpha", secret=SECRET_A,
                        timeout=DEADLINE) as c:
        assert c.new_limit(1, 40, 1, "buy", 1, 1)[0].KIND == orders.Accepted.KIND
    assert _served(venue, 41)


def test_plain_client_cut_off(venue):
    with socket.create_connection(("127.0.0.1", venue.port), timeout=DEADLINE) as s:
        s.sendall(orders.encode_frame(orders.NewLimit(1, 1, 1, 1, 100, 1)))
        assert _cut_off(s)
    venue.wait_log("TLS handshake with 127.0.0.1 failed")
    assert _served(venue, 50)


def test_stalled_handshake_cut_off(venue):
    with socket.create_connection(("127.0.0.1", venue.port), timeout=DEADLINE) as s:
        s.sendall(b"\x16\x03\x01\x02\x00")  # a record header announcing 512 bytes, then silence
        assert _served(venue, 60)  # the handshake runs inside the loop: nothing waits on it
        assert _served(venue, 61)
        assert _cut_off(s)
    venue.wait_log("not finished in 2 s")
    venue.wait_log("stalled in the TLS handshake")
    assert _served(venue, 62)
    venue.stop()


def test_tls_url_to_a_plain_port_refused(tmp_path_factory):
    """A tls: URL to a port without TLS: the handshake fails, the client says so."""
    from engine_service import engine_service
    svc = engine_service(tmp_path_factory)
    try:
        with pytest.raises(EngineServiceError) as ei:
            orders.connect(f"tls:127.0.0.1:{svc.tcp_port}", timeout=DEADLINE)
        assert ei.value.code == -errno.EPROTO
        with orders.connect(svc.url("tcp"), timeout=DEADLINE) as c:  # the service goes on
            assert c.new_limit(1, 1, 1, "buy", 1, 1)[0].KIND == orders.Accepted.KIND
    finally:
        svc.stop()


def test_host_not_named_refused(tmp_path, certs):
    """The certificate names localhost and 127.0.0.1: a service on 0.0.0.0 reached as
    127.0.0.2 is refused by the client (the host check), as localhost it is not."""
    v = TlsVenue(tmp_path, certs)
    v.options = ("--tcp", "0.0.0.0:0", *v.options[2:])
    super(TlsVenue, v).start()
    try:
        v.wait_log("listening tcp")
        port = int(re.search(r"listening tcp 0\.0\.0\.0:(\d+) \(TLS\)", v.log()).group(1))
        with pytest.raises(EngineServiceError) as ei:
            orders.connect(f"tls:127.0.0.2:{port}", ca=v.ca, timeout=DEADLINE)
        assert ei.value.code == -errno.EPROTO
        with orders.connect(f"tls://localhost:{port}", session="alpha", secret=SECRET_A,
                            ca=v.ca, timeout=DEADLINE) as c:
            assert c.new_limit(1, 1, 1, "buy", 1, 1)[0].KIND == orders.Accepted.KIND
    finally:
        v.stop()


def _refused(tmp_path: Path, *args: str) -> tuple[int, str]:
    p = subprocess.run([bin_path(), "engine", "serve", "--journal", str(tmp_path / "j"), *args],
                       capture_output=True, text=True, timeout=DEADLINE)
    return p.returncode, p.stderr


def test_startup_refusals(tmp_path, certs):
    sessions = tmp_path / "sessions"
    sessions.write_text(f"alpha {SECRET_A} 1\n")
    sessions.chmod(0o600)
    rc, err = _refused(tmp_path, "--tcp", "0.0.0.0:0", "--sessions", str(sessions))
    assert rc == 2 and "needs --tls-cert/--tls-key" in err, err
    rc, err = _refused(tmp_path, "--tcp", "0.0.0.0:0", "--tls-cert", certs["cert"],
                       "--tls-key", certs["key"])
    assert rc == 2 and "needs --sessions" in err, err
    open_key = tmp_path / "open.key"
    open_key.write_bytes(Path(certs["key"]).read_bytes())
    open_key.chmod(0o644)
    rc, err = _refused(tmp_path, "--tcp", "127.0.0.1:0", "--tls-cert", certs["cert"],
                       "--tls-key", str(open_key))
    assert rc == 1 and "mode 0644" in err and f"chmod 600 {open_key}" in err, err
