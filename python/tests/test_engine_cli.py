"""`tollfree engine run | gen | snapshot` as a user runs them: the real binary on real files.

Every comparison of state is a state hash printed by the engine; the journals are cut, corrupted
and hand-built here (OFL1 frames + CRC32C written by this file, independently of the C codec)."""
import json
import os
import random
import struct
import subprocess

import pytest

from tollfree._lib import bin_path


def run(*args, check=True):
    r = subprocess.run([bin_path(), "engine", *map(str, args)], capture_output=True, text=True,
                       timeout=600)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def run_json(*args):
    return json.loads(run("run", *args, "--quiet").stdout)


@pytest.fixture(scope="module")
def flow(tmp_path_factory):
    d = tmp_path_factory.mktemp("engine")
    path = d / "flow.ofl"
    run("gen", "--count", 60000, "--seed", 11, path)
    return path


# ---- an independent OFL1 writer: stream frames + CRC32C --------------------------------------

def _crc_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC_TABLE = _crc_table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def record(kind: int, seq: int, payload: bytes) -> bytes:
    frame = struct.pack("<HBQ", 9 + len(payload), kind, seq) + payload
    return frame + struct.pack("<I", crc32c(frame))


def journal(records, session=5) -> bytes:
    head = b"OFL1" + struct.pack("<HQB", 1, session, 0)
    return head + b"".join(record(k, i, p) for i, (k, p) in enumerate(records))


def new_limit(cseq, account, coid, instr, side, price, qty):
    return 0x01, struct.pack("<QQQQBqQQ", cseq, account, coid, instr, side, price, qty, 0)


def new_market(cseq, account, coid, instr, side, qty):
    return 0x02, struct.pack("<QQQQBQQ", cseq, account, coid, instr, side, qty, 0)


def cancel(cseq, order_id):
    return 0x03, struct.pack("<QQ", cseq, order_id)


# ---- tests -----------------------------------------------------------------------------------

def test_help_and_usage_errors(tmp_path):
    for sub in ("run", "gen", "snapshot"):
        r = run(sub, "--help")
        assert "usage: tollfree engine " + sub in r.stdout
    assert "run" in run("--help").stdout
    for args, msg in ((["run"], "required"), (["gen", "x.ofl"], "--count"),
                      (["gen", "--count", "5", "--mix", "nope", tmp_path / "a.ofl"], "--mix"),
                      (["run", tmp_path / "a", "--bogus"], "unknown option"),
                      (["run", "x", "--instruments", "5-2"], "bad list"),
                      (["frobnicate"], "unknown subcommand")):
        r = run(*args, check=False)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)
    r = run("run", tmp_path / "missing.ofl", check=False)
    assert r.returncode == 1 and "missing.ofl" in r.stderr


def test_gen_is_deterministic_and_refuses_what_cannot_fit(tmp_path, flow):
    other = tmp_path / "again.ofl"
    run("gen", "--count", 60000, "--seed", 11, other)
    assert other.read_bytes() == flow.read_bytes()
    r = run("gen", "--count", 10, other, check=False)
    assert r.returncode == 1 and "exists" in r.stderr
    huge = tmp_path / "huge.ofl"
    r = run("gen", "--count", 99999999999999, huge, check=False)
    assert r.returncode == 1 and "GB" in r.stderr
    assert not huge.exists() and not (tmp_path / "huge.ofl.tmp").exists()


def test_run_summary_and_replay_give_the_same_hash(flow):
    a, b = run_json(flow), run_json(flow)
    for key in ("commands", "applied", "duplicates", "skipped", "malformed", "events", "trades",
                "rejected", "resting_orders", "last_command_seq", "next_order_id", "state_hash",
                "seconds"):
        assert key in a, key
    assert a["state_hash"] == b["state_hash"] and len(a["state_hash"]) == 18
    assert a["commands"] == a["applied"] == 60000 and a["journal"] == {"whole": True}
    assert 0 < a["trades"] < a["commands"] and 500 <= a["resting_orders"] <= 1500


def test_exchange_core_mix_proportions(tmp_path):
    path = tmp_path / "mix.ofl"
    run("gen", "--count", 40000, "--seed", 3, path)
    dump = subprocess.run([bin_path(), "journal", "dump", str(path)], capture_output=True,
                          text=True, timeout=600).stdout.splitlines()
    kinds = [json.loads(line)["kind"] for line in dump]
    share = {k: kinds.count(k) / len(kinds) for k in set(kinds)}
    assert 0.78 < share["Replace"] < 0.86
    assert 0.06 < share["NewLimit"] < 0.13 and 0.02 < share["NewMarket"] < 0.04
    assert 0.02 < share.get("CancelByOrder", 0) + share.get("CancelByClient", 0) < 0.09
    s = run_json(path)
    assert s["rejected"] == 0  # cancels and replaces hit live orders; client ids are unique


def test_events_journal_is_readable_and_counts_match(tmp_path, flow):
    ev = tmp_path / "events.ofl"
    s = json.loads(run("run", flow, "--events", ev, "--quiet").stdout)
    v = subprocess.run([bin_path(), "journal", "verify", str(ev)], capture_output=True, text=True,
                       timeout=600)
    assert v.returncode == 0 and f"{s['events']} records" in v.stdout
    lines = subprocess.run([bin_path(), "journal", "dump", str(ev)], capture_output=True,
                           text=True, timeout=600).stdout.splitlines()
    evs = [json.loads(x) for x in lines]
    assert [e["event_seq"] for e in evs] == list(range(1, s["events"] + 1))
    assert sum(e["kind"] == "Trade" for e in evs) == s["trades"]


def test_snapshot_plus_tail_equals_full_run(tmp_path, flow):
    full_ev, tail_ev = tmp_path / "full.ofl", tmp_path / "tail.ofl"
    full = json.loads(run("run", flow, "--events", full_ev, "--quiet").stdout)
    for at in (1, 12345, 59999, 60000):
        snap = tmp_path / f"s{at}.tfs"
        info = json.loads(run("snapshot", flow, "--at", at, "--out", snap).stdout)
        assert info["last_command_seq"] == at
        tail = json.loads(run("run", flow, "--from-snapshot", snap, "--events", tail_ev,
                              "--quiet").stdout)
        assert tail["state_hash"] == full["state_hash"]
        assert tail["covered_by_snapshot"] == at
        dump = lambda p: subprocess.run([bin_path(), "journal", "dump", str(p)],  # noqa: E731
                                        capture_output=True, text=True, timeout=600).stdout
        full_tail = [json.loads(x) for x in dump(full_ev).splitlines()]
        full_tail = [e for e in full_tail if e["command_seq"] > at]
        got = [json.loads(x) for x in dump(tail_ev).splitlines()]
        for e in full_tail + got:
            del e["journal_seq"]
        assert got == full_tail


def test_damaged_snapshot_is_refused(tmp_path, flow):
    snap = tmp_path / "s.tfs"
    run("snapshot", flow, "--at", 30000, "--out", snap)
    good = snap.read_bytes()
    rng = random.Random(5)
    for trial in range(20):
        bad = bytearray(good)
        if trial % 3 == 0:
            bad = bad[:rng.randrange(len(bad))]
        else:
            i = rng.randrange(len(bad))
            bad[i] ^= 1 << rng.randrange(8)
        snap.write_bytes(bytes(bad))
        r = run("run", flow, "--from-snapshot", snap, check=False)
        assert r.returncode == 1 and "snapshot" in r.stderr and r.stdout == ""


def test_torn_and_corrupt_journals_stop_at_the_valid_prefix(tmp_path, flow):
    data = flow.read_bytes()
    rng = random.Random(9)
    for trial in range(12):
        cut = tmp_path / "cut.ofl"
        if trial % 2:
            cut.write_bytes(data[:rng.randrange(16, len(data))])
        else:
            b = bytearray(data)
            b[rng.randrange(15, len(b))] ^= 0x40
            cut.write_bytes(bytes(b))
        r = run("run", cut, "--quiet", check=False)
        s = json.loads(r.stdout)
        if s["journal"]["whole"]:
            assert r.returncode == 0
            continue  # the cut fell on a record boundary
        # A torn tail (the damage is at the very end) is exit 0; damage with records after it
        # is exit 1; both name where the valid prefix ends on stderr.
        assert r.returncode == (0 if s["journal"]["torn_tail"] else 1), r.stderr
        assert r.returncode == 1 or trial % 2 or s["journal"]["records_after"] == 0
        assert f'offset {s["journal"]["offset"]}' in r.stderr
        prefix = tmp_path / "prefix.ofl"
        prefix.write_bytes(cut.read_bytes()[:s["journal"]["offset"]])
        p = run_json(prefix)
        assert p["journal"] == {"whole": True}
        assert p["state_hash"] == s["state_hash"]
        assert p["records"] == s["journal"]["journal_seq"]


def test_hand_built_journal_semantics(tmp_path):
    # 1: rests; 2: duplicate seq; 3: market sweeps 1 and is partly canceled;
    # a heartbeat, an event record and a malformed (side 7, CRC valid) record are stepped over.
    recs = [new_limit(1, 10, 100, 1, 1, 5000, 3),
            new_limit(1, 10, 101, 1, 1, 5000, 3),
            (0x00, b""),
            (0x84, struct.pack("<QQQQ", 1, 1, 1, 1)),
            new_limit(2, 11, 200, 1, 7, 5000, 3),
            new_market(3, 12, 300, 1, 0, 5),
            cancel(4, 99)]
    path = tmp_path / "hand.ofl"
    path.write_bytes(journal(recs))
    ev = tmp_path / "ev.ofl"
    s = json.loads(run("run", path, "--events", ev, "--quiet").stdout)
    assert (s["records"], s["commands"], s["applied"], s["duplicates"], s["skipped"],
            s["malformed"]) == (7, 5, 3, 1, 2, 1)
    assert (s["trades"], s["rejected"], s["resting_orders"], s["next_order_id"]) == (1, 1, 0, 3)
    lines = subprocess.run([bin_path(), "journal", "dump", str(ev)], capture_output=True,
                           text=True, timeout=600).stdout.splitlines()
    kinds = [(e["kind"], e.get("order_id", e.get("maker_order_id"))) for e in map(json.loads, lines)]
    assert kinds == [("Accepted", 1), ("Accepted", 2), ("Trade", 1), ("Canceled", 2),
                     ("Rejected", None)]
    # The state hash of the empty book after these commands, computed here from the spec.
    h = 0xcbf29ce484222325

    def fnv(h, v):
        for byte in struct.pack("<Q", v):
            h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
        return h
    for instr in range(1, 17):
        h = fnv(fnv(fnv(h, instr), 0), 0)
    for v in (3, 4, 6):  # next_order_id, last_command_seq, next_event_seq
        h = fnv(h, v)
    assert s["state_hash"] == f"0x{h:016x}"


def test_book_lists_priority_order(tmp_path):
    recs = [new_limit(1, 1, 1, 2, 0, 100, 5), new_limit(2, 1, 2, 2, 0, 101, 5),
            new_limit(3, 1, 3, 2, 0, 100, 7), new_limit(4, 1, 4, 2, 1, 105, 1)]
    path = tmp_path / "b.ofl"
    path.write_bytes(journal(recs))
    s = json.loads(run("run", path, "--book", "--quiet").stdout)
    assert s["book"] == [{"instrument_id": 2,
                          "bids": [{"order_id": 2, "account_id": 1, "client_order_id": 2,
                                    "price": 101, "remaining": 5},
                                   {"order_id": 1, "account_id": 1, "client_order_id": 1,
                                    "price": 100, "remaining": 5},
                                   {"order_id": 3, "account_id": 1, "client_order_id": 3,
                                    "price": 100, "remaining": 7}],
                          "asks": [{"order_id": 4, "account_id": 1, "client_order_id": 4,
                                    "price": 105, "remaining": 1}]}]


def test_live_order_limit_and_far_apart_prices(tmp_path):
    # Prices anywhere in 1..INT64_MAX cost one level each, never memory by distance.
    big = 2**63 - 1
    recs = [new_limit(i + 1, 1, i + 1, 1, i % 2, [1, big, 2**40, big - 1, 7][i], 1)
            for i in range(5)]
    path = tmp_path / "far.ofl"
    path.write_bytes(journal(recs))
    s = json.loads(run("run", path, "--max-orders", 5, "--quiet").stdout)
    assert (s["resting_orders"], s["rejected"], s["trades"], s["price_levels"]) == (5, 0, 0, 5)
    s = json.loads(run("run", path, "--max-orders", 2, "--quiet").stdout)
    assert (s["resting_orders"], s["rejected"]) == (2, 3)  # Rejected(Other) at the limit


# ---- the instrument list stored with a journal (issue 21) ---------------------------------------

def serve_and_stop(tmp_path, journal_dir, *extra):
    """`engine serve --journal DIR ...` started and stopped at once (SIGTERM): its JSON line, or
    (returncode, stderr) when it refused to start."""
    import signal
    import time

    sock = tmp_path / f"s{len(list(tmp_path.iterdir()))}.sock"
    log = tmp_path / "serve.log"
    with open(log, "wb") as err:
        p = subprocess.Popen([bin_path(), "engine", "serve", "--journal", str(journal_dir),
                              "--unix", str(sock), *map(str, extra)], stdout=subprocess.PIPE,
                             stderr=err, text=True)
        deadline = time.monotonic() + 120
        while "listening unix" not in log.read_text() and p.poll() is None:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.01)
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=120)
    if p.returncode:
        return p.returncode, log.read_text()
    return json.loads(out.splitlines()[-1])


def orders_journal(path, instruments=(1, 2, 3)):
    """Orders on instruments 1..3 that rest (no trades): the state hash depends on the books."""
    recs = [new_limit(k + 1, 1, k + 1, instruments[k % len(instruments)], k % 2,
                      100 + (5 if k % 2 else -5), 1) for k in range(6)]
    path.write_bytes(journal(recs))
    return path


def test_serve_stores_its_instruments_and_run_uses_them(tmp_path):
    """Before: `engine run DIR/commands.ofl` without --instruments used 1-16 and printed another
    state hash than the service's, silently."""
    d = tmp_path / "j"
    first = serve_and_stop(tmp_path, d, "--instruments", "1,2")
    side = d / "commands.ofl.instruments"
    text = side.read_text()
    assert text.startswith("tollfree-instruments 1\nsession_id ") and "\ninstruments 1,2\n" in text
    s = run_json(d / "commands.ofl")
    assert s["state_hash"] == first["state_hash"]
    assert (s["instruments"], s["instruments_from"]) == ("1,2", "journal")
    # the same with the list given; another list is refused unless forced
    assert run_json(d / "commands.ofl", "--instruments", "1-2")["instruments_from"] == "option"
    r = run("run", d / "commands.ofl", "--instruments", "1-16", check=False)
    assert r.returncode == 2 and "differs from the list stored" in r.stderr and "(1,2)" in r.stderr
    forced = run_json(d / "commands.ofl", "--instruments", "1-16", "--force")
    assert forced["state_hash"] != first["state_hash"] and forced["instruments"] == "1-16"
    # a restart without --instruments keeps the stored list; with another it refuses
    again = serve_and_stop(tmp_path, d)
    assert again["state_hash"] == first["state_hash"]
    code, err = serve_and_stop(tmp_path, d, "--instruments", "1-4")
    assert code == 1 and "was written by an engine with instruments 1,2" in err
    # snapshot takes the stored list too
    snap = tmp_path / "s.tfs"
    info = json.loads(run("snapshot", d / "commands.ofl", "--out", snap).stdout)
    assert info["instruments_from"] == "journal" and info["state_hash"] == first["state_hash"]


def test_stored_list_changes_the_hash_and_old_journals_replay_as_before(tmp_path):
    path = orders_journal(tmp_path / "c.ofl")
    old = run("run", path, "--quiet")
    s_old = json.loads(old.stdout)
    assert s_old["instruments_from"] == "default" and s_old["instruments"] == "1-16"
    assert "stores no instrument list" in old.stderr  # said, not silent
    assert s_old["state_hash"] == run_json(path, "--instruments", "1-16")["state_hash"]
    # a journal with a stored list 1-3: replays with it, the hash of an engine with 1-3
    import ctypes

    from tollfree._lib import lib

    L = lib()
    ids = (ctypes.c_uint64 * 3)(3, 1, 2)
    L.tf_journal_instruments_save.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_void_p,
                                              ctypes.c_uint32]
    assert L.tf_journal_instruments_save(str(path).encode(), 5, ids, 3) == 0
    s = run_json(path)
    assert (s["instruments"], s["instruments_from"]) == ("1-3", "journal")
    assert s["state_hash"] == run_json(path, "--instruments", "1-3")["state_hash"]
    assert s["state_hash"] != s_old["state_hash"]
    # another journal's list (session 5 vs 6), a damaged one: refused, never used silently
    other = orders_journal(tmp_path / "o.ofl")
    other.write_bytes(other.read_bytes()[:6] + struct.pack("<Q", 6) + other.read_bytes()[14:])
    (tmp_path / "o.ofl.instruments").write_bytes((tmp_path / "c.ofl.instruments").read_bytes())
    r = run("run", other, check=False)
    assert r.returncode == 1 and "another journal (session 5, this journal's is 6)" in r.stderr
    side = tmp_path / "c.ofl.instruments"
    side.write_text(side.read_text().replace("1-3", "1-4"))
    r = run("run", path, check=False)
    assert r.returncode == 1 and "cannot be read" in r.stderr
    assert run_json(path, "--instruments", "1-3", "--force")["state_hash"] == s["state_hash"]
    v = subprocess.run([bin_path(), "journal", "verify", str(path)], capture_output=True,
                       text=True, timeout=600)
    assert v.returncode == 0  # the journal itself is untouched
