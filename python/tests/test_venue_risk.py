"""Pre-trade risk through a real service (docs/venue.md, "Risk"): `tollfree engine serve
--sessions FILE --risk FILE` over a Unix socket.

Each rule refuses one over its limit and takes exactly the limit (VenueRejected with the rule's
reason), a SIGHUP reload changes the limits and a bad reload is refused with its line while the
old limits stay, the kill switch (an admin session's KillSwitch record) cancels an account's
orders and refuses its new ones until switched off (and a non-admin's is refused), a
cancel-on-disconnect session's orders are canceled when its connection closes, and `tollfree
engine run` over the journal reproduces the service's state hash. Deadlines only guard against
hangs.
"""
from __future__ import annotations

import hashlib
import hmac
import signal
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

SECRETS = {"alpha": "alpha-secret-0123456789", "ops": "ops-secret-0123456789ab",
           "bravo": "bravo-secret-9876543210"}
RISK = ("# limits\n"
        "account 1 max_qty 100 max_notional 100000 max_open 2\n"
        "account 2 band 5\n"
        "admin ops\n"
        "cancel-on-disconnect bravo\n")


class Venue(VenueProcess):
    def __init__(self, d: Path):
        self.risk = d / "risk"
        self.risk.write_text(RISK)
        super().__init__(d, f"alpha {SECRETS['alpha']} 1,2\nops {SECRETS['ops']} 9\n"
                            f"bravo {SECRETS['bravo']} 3\n", "--risk", str(self.risk),
                         secrets=SECRETS)


@pytest.fixture()
def venue(tmp_path):
    v = Venue(tmp_path)
    v.start()
    yield v
    if v.proc.poll() is None:
        v.proc.kill()
        v.proc.wait()


def reason(reply) -> str:
    first = reply[0]
    return first.reason_name if isinstance(first, orders.VenueRejected) else type(first).__name__


def test_rules_at_their_limits(venue):
    with venue.connect("alpha") as a:
        assert reason(a.new_limit(1, 1, 1, "buy", 1000, 101)) == "MaxQuantity"
        assert reason(a.new_market(1, 2, 1, "buy", 101)) == "MaxQuantity"
        assert reason(a.new_limit(1, 3, 1, "buy", 1001, 100)) == "MaxNotional"  # 100100
        first = a.new_limit(1, 4, 1, "buy", 1000, 100)  # exactly 100 and 100000: taken
        assert reason(first) == "Accepted"
        assert reason(a.new_limit(1, 5, 1, "buy", 999, 1)) == "Accepted"
        assert reason(a.new_limit(1, 6, 1, "buy", 998, 1)) == "MaxOpenOrders"
        assert reason(a.cancel(first[0].order_id)) == "Canceled"  # cancels always pass
        assert reason(a.new_limit(1, 6, 1, "buy", 998, 1)) == "Accepted"
        # band 5 around the best ask of instrument 2 (empty at first: no reference, taken)
        assert reason(a.new_limit(2, 1, 2, "sell", 1010, 1)) == "Accepted"
        assert reason(a.new_limit(2, 2, 2, "buy", 1004, 1)) == "PriceBand"
        assert reason(a.new_limit(2, 3, 2, "buy", 1005, 1)) == "Accepted"
        rej = a.new_limit(1, 7, 1, "buy", 1000, 101)[0]
        assert rej.client_order_id == 7 and rej.command_seq > 0  # journaled, numbered
    before = venue.stop()
    run = subprocess.run([bin_path(), "engine", "run", str(venue.dir / "j" / "commands.ofl"),
                          "--quiet"], capture_output=True, text=True, timeout=DEADLINE)
    assert run.returncode == 0 and before["state_hash"] in run.stdout, run.stdout + run.stderr
    venue.start()  # the config is journaled again at each start; the checks hold as before
    with venue.connect("alpha") as a:
        assert reason(a.new_limit(1, 8, 1, "buy", 1000, 101)) == "MaxQuantity"


def test_sighup_reload(venue):
    with venue.connect("alpha") as a:
        assert reason(a.new_limit(1, 1, 1, "buy", 100, 150)) == "MaxQuantity"
        venue.risk.write_text(RISK.replace("max_qty 100 ", "max_qty 200 "))
        venue.proc.send_signal(signal.SIGHUP)
        venue.wait_log("reloaded on SIGHUP")
        assert reason(a.new_limit(1, 2, 1, "buy", 100, 150)) == "Accepted"
        venue.risk.write_text(RISK + "account 5 max_qty lots\n")
        venue.proc.send_signal(signal.SIGHUP)
        venue.wait_log("refused, the config in force stays")
        assert "line 6: max_qty 'lots'" in venue.log()
        assert reason(a.new_limit(1, 3, 1, "buy", 100, 200)) == "Accepted"
        assert reason(a.new_limit(1, 4, 1, "buy", 100, 201)) == "MaxQuantity"
    stopped = venue.stop()
    run = subprocess.run([bin_path(), "engine", "run", str(venue.dir / "j" / "commands.ofl"),
                          "--quiet"], capture_output=True, text=True, timeout=DEADLINE)
    assert stopped["state_hash"] in run.stdout, run.stdout + run.stderr


def raw_logon(venue: Venue, name: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(DEADLINE)
    s.connect(venue.sock)
    ch = b""
    while len(ch) < 40:
        ch += s.recv(40 - len(ch))
    mac = hmac.new(SECRETS[name].encode(), b"tollfree-venue-logon-v1" + ch[8:40] + name.encode(),
                   hashlib.sha256).digest()
    body = bytes([2, len(name)]) + name.encode() + mac
    s.sendall(struct.pack("<H", len(body)) + body)
    res = b""
    while len(res) < 20:
        res += s.recv(20 - len(res))
    assert res[3] == 0
    return s


def kill(s: socket.socket, account: int, on: bool) -> list[tuple[int, bytes]]:
    """Sends a KillSwitch record (0x12: u64 command_seq, u64 account, u8 on); returns the
    reply's frames (kind, payload) up to and including the Heartbeat."""
    body = struct.pack("<QQB", 0, account, 1 if on else 0)
    s.sendall(struct.pack("<HBQ", 9 + len(body), 0x12, 0) + body)
    frames, buf = [], b""
    while True:
        while len(buf) < 2 or len(buf) < 2 + struct.unpack_from("<H", buf)[0]:
            chunk = s.recv(4096)
            assert chunk, "closed"
            buf += chunk
        n = 2 + struct.unpack_from("<H", buf)[0]
        frames.append((buf[2], buf[11:n]))
        buf = buf[n:]
        if frames[-1][0] == 0:
            return frames


def test_kill_switch(venue):
    with venue.connect("alpha") as a:
        ids = [a.new_limit(1, i, 1, "buy", 100 + i, 1)[0].order_id for i in (1, 2)]
        ops = raw_logon(venue, "ops")
        frames = kill(ops, 1, True)
        canceled = [struct.unpack_from("<QQQQ", p)[3] for k, p in frames if k == 0x84]
        assert sorted(canceled) == sorted(ids)
        assert reason(a.new_limit(1, 3, 1, "buy", 100, 1)) == "KillSwitch"
        assert reason(a.new_limit(2, 3, 1, "buy", 100, 1)) == "Accepted"  # another account
        assert reason(a.cancel(ids[0])) == "Rejected"  # gone already: OrderNotFound
        refused = kill(raw_logon(venue, "alpha"), 1, False)  # not an admin
        assert refused[0][0] == 0x90 and refused[0][1][-1] == 16  # NotAuthorized
        assert reason(a.new_limit(1, 4, 1, "buy", 100, 1)) == "KillSwitch"
        assert [k for k, _ in kill(ops, 1, False)] == [0]
        assert reason(a.new_limit(1, 5, 1, "buy", 100, 1)) == "Accepted"
        ops.close()
    stopped = venue.stop()
    run = subprocess.run([bin_path(), "engine", "run", str(venue.dir / "j" / "commands.ofl"),
                          "--quiet"], capture_output=True, text=True, timeout=DEADLINE)
    assert stopped["state_hash"] in run.stdout, run.stdout + run.stderr


def test_kill_switch_cancels_a_gateway_order(venue):
    """A resting order placed by a gateway command (a GTC limit Order) is canceled by the kill
    switch with a CanceledEx of reason 4 (Account) that names the owner's account and client
    order id (an OFL1 NewLimit of the same account gets a plain Canceled); while the switch is on
    the account's new orders are refused (gateway Order and NewLimit alike: VenueRejected
    KillSwitch) and its gateway cancel finds nothing; once off, an Order of it is accepted."""
    with venue.connect("alpha") as a:
        gw = a.order(1, 11, 1, "buy", 100, 1, tif=orders.GTC)
        assert [type(e).__name__ for e in gw] == ["AcceptedEx"]
        gw_id = gw[0].order_id
        plain_id = a.new_limit(1, 12, 1, "buy", 99, 1)[0].order_id
        assert reason(a.order(2, 13, 1, "buy", 98, 1, tif=orders.GTC)) == "AcceptedEx"
        ops = raw_logon(venue, "ops")
        frames = kill(ops, 1, True)
        ex = [orders.decode_frame(struct.pack("<HBQ", 9 + len(p), k, 0) + p, venue=True)[0]
              for k, p in frames if k == orders.CanceledEx.KIND]
        assert [(c.order_id, c.account_id, c.client_order_id, c.remaining, c.reason,
                 c.reason_name) for c in ex] == [(gw_id, 1, 11, 1, 4, "Account")]
        canceled = [struct.unpack_from("<QQQQ", p)[3] for k, p in frames if k == 0x84]
        assert canceled == [plain_id]
        refused = a.order(1, 14, 1, "buy", 100, 1, tif=orders.GTC)
        assert reason(refused) == "KillSwitch" and refused[0].client_order_id == 14
        assert reason(a.order(1, 15, 1, "buy", 0, 1, type=orders.MARKET,
                              tif=orders.IOC)) == "KillSwitch"
        assert reason(a.new_limit(1, 16, 1, "buy", 100, 1)) == "KillSwitch"
        assert type(a.order_cancel(1, 11)[0]).__name__ == "RejectedEx"  # gone: OrderNotFound
        assert type(a.order_cancel(2, 13)[0]).__name__ == "CanceledEx"  # untouched, live
        assert [k for k, _ in kill(ops, 1, False)] == [0]
        assert reason(a.order(1, 17, 1, "buy", 100, 1, tif=orders.GTC)) == "AcceptedEx"
        ops.close()
    stopped = venue.stop()
    run = subprocess.run([bin_path(), "engine", "run", str(venue.dir / "j" / "commands.ofl"),
                          "--quiet"], capture_output=True, text=True, timeout=DEADLINE)
    assert stopped["state_hash"] in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize("snapshot", [False, True])
def test_kill_switch_survives_a_restart(tmp_path, snapshot):
    """A kill switch on stays on across a restart, whether the start replays the whole journal
    or starts from a snapshot written after the switch (the switch's record is then before the
    snapshot), and the state hash still equals `engine run`."""
    v = Venue(tmp_path)
    extra = ("--snapshot-every", "1") if snapshot else ("--snapshot-every", "0")
    v.start(*extra)
    try:
        with v.connect("alpha") as a:
            assert reason(a.new_limit(1, 1, 1, "buy", 100, 1)) == "Accepted"
            ops = raw_logon(v, "ops")
            kill(ops, 1, True)
            ops.close()
            assert reason(a.new_limit(2, 2, 1, "buy", 100, 1)) == "Accepted"  # after the switch
        v.stop()
        v.start(*extra)
        if snapshot:
            assert "snapshot" in v.log()
        with v.connect("alpha") as a:
            assert reason(a.new_limit(1, 3, 1, "buy", 100, 1)) == "KillSwitch"
            assert reason(a.new_limit(2, 4, 1, "buy", 100, 1)) == "Accepted"
        stopped = v.stop()
    finally:
        if v.proc.poll() is None:
            v.proc.kill()
            v.proc.wait()
    run = subprocess.run([bin_path(), "engine", "run", str(v.dir / "j" / "commands.ofl"),
                          "--quiet"], capture_output=True, text=True, timeout=DEADLINE)
    assert stopped["state_hash"] in run.stdout, run.stdout + run.stderr


def test_cancel_on_disconnect(venue):
    b = venue.connect("bravo")
    # so large that alpha's one-lot buys below cannot use it up before the deadline: while it
    # lives every buy trades, so a buy that only rests shows it was canceled
    oid = b.new_limit(3, 1, 1, "sell", 500, 10 ** 12)[0].order_id
    b2 = venue.connect("bravo")  # a second connection of the session keeps the orders
    b.close()
    with venue.connect("alpha") as a:
        # still live: alpha's buy trades with it
        assert [type(e).__name__ for e in a.new_limit(2, 1, 1, "buy", 500, 1)] == \
            ["Accepted", "Trade"]
        b2.close()  # the last one: its orders go
        until = time.monotonic() + DEADLINE
        coid = 10
        while True:
            coid += 1
            r = a.new_limit(2, coid, 1, "buy", 500, 1)
            if [type(e).__name__ for e in r] == ["Accepted"]:
                break
            assert [type(e).__name__ for e in r] == ["Accepted", "Trade"]
            assert r[1].maker_order_id == oid and time.monotonic() < until
    stopped = venue.stop()
    run = subprocess.run([bin_path(), "engine", "run", str(venue.dir / "j" / "commands.ofl"),
                          "--quiet"], capture_output=True, text=True, timeout=DEADLINE)
    assert stopped["state_hash"] in run.stdout, run.stdout + run.stderr


def test_bad_config_refused(tmp_path):
    v = Venue(tmp_path)
    v.risk.write_text("account 1 max_qty 10\naccount 1 max_qty 11\n")
    p = subprocess.run([bin_path(), "engine", "serve", "--journal", str(tmp_path / "j"),
                        "--unix", v.sock, "--sessions", str(v.sessions), "--risk", str(v.risk)],
                       capture_output=True, text=True, timeout=DEADLINE)
    assert p.returncode == 1 and f"{v.risk}: line 2: account 1 appears twice" in p.stderr


@pytest.mark.parametrize("snapshot", [False, True])
def test_band_around_the_last_trade(tmp_path, snapshot):
    """`ref last`: before the instrument's first trade the band is around the book (as without
    it); after, around the last trade price, in ticks and in basis points, exactly at the band
    taken and one over refused, where the book's reference would decide otherwise. The same
    after a restart, from the whole journal or from a snapshot written after the trade, and
    `engine run` reproduces the state hash."""
    v = Venue(tmp_path)
    v.risk.write_text("account 1 band 5 ref last\n"
                      "account 2 band 1% ref last\n"
                      "account 3 band 5\n"
                      "admin ops\n")
    extra = ("--snapshot-every", "1") if snapshot else ("--snapshot-every", "0")
    v.start(*extra)

    def after_the_trade(a, coid: int):
        # last trade 1000, best ask 1008: ticks 995..1005 (the book would take 1003..1013)
        assert reason(a.new_limit(1, coid + 0, 1, "buy", 1006, 1)) == "PriceBand"
        assert reason(a.new_limit(1, coid + 1, 1, "buy", 1005, 1)) == "Accepted"
        assert reason(a.new_limit(1, coid + 2, 1, "buy", 994, 1)) == "PriceBand"
        assert reason(a.new_limit(1, coid + 3, 1, "buy", 995, 1)) == "Accepted"
        # 1% of 1000: 990..1010
        assert reason(a.new_limit(2, coid + 4, 1, "sell", 1011, 1)) == "PriceBand"
        assert reason(a.new_limit(2, coid + 5, 1, "sell", 1010, 1)) == "Accepted"
        assert reason(a.new_limit(2, coid + 6, 1, "buy", 989, 1)) == "PriceBand"
        assert reason(a.new_limit(2, coid + 7, 1, "buy", 990, 1)) == "Accepted"

    try:
        with v.connect("alpha") as a, v.connect("bravo") as b:
            # no trade yet: the book's reference (the ask at 1000 once there is one)
            assert reason(a.new_limit(2, 1, 1, "sell", 1000, 1)) == "Accepted"
            assert reason(a.new_limit(2, 2, 1, "sell", 1008, 10)) == "Accepted"
            assert reason(a.new_limit(1, 3, 1, "buy", 994, 1)) == "PriceBand"
            assert reason(a.new_limit(1, 4, 1, "buy", 995, 1)) == "Accepted"
            # the first trade, at 1000 (account 3's band is around the book: the ask at 1000)
            assert [type(e).__name__ for e in b.new_limit(3, 1, 1, "buy", 1000, 1)] == \
                ["Accepted", "Trade"]
            after_the_trade(a, 10)
            # account 3 keeps the book's reference: the best ask is 1008 now
            assert reason(b.new_limit(3, 2, 1, "buy", 1003, 1)) == "Accepted"
            assert reason(b.new_limit(3, 3, 1, "buy", 1002, 1)) == "PriceBand"
        v.stop()
        v.start(*extra)
        if snapshot:
            assert "snapshot" in v.log()
        with v.connect("alpha") as a:
            after_the_trade(a, 20)  # client order ids not live yet
        stopped = v.stop()
    finally:
        v.kill()
    run = subprocess.run([bin_path(), "engine", "run", str(v.dir / "j" / "commands.ofl"),
                          "--quiet"], capture_output=True, text=True, timeout=DEADLINE)
    assert stopped["state_hash"] in run.stdout, run.stdout + run.stderr
