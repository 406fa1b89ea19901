"""`tollfree journal gen | verify` and the other first-contact mistakes of issue 13 item 7, as a new
user makes them: the real binary on real files. Each must end in a clear error and leave no junk:
no partial journal that `verify` would call whole, no stray temporary file."""
import os
import signal
import struct
import subprocess

from tollfree._lib import bin_path
from conftest import DEADLINE, wait_until  # noqa: E402


def run(*args):
    return subprocess.run([bin_path(), *map(str, args)], capture_output=True, text=True,
                          timeout=DEADLINE)


def test_gen_refuses_a_count_that_cannot_fit(tmp_path):
    out = tmp_path / "huge.ofl"
    r = run("journal", "gen", "--count", 99999999999999, out)
    assert r.returncode == 2
    assert "records need up to" in r.stderr and "GB free" in r.stderr
    assert os.listdir(tmp_path) == []  # nothing written, no OUT.tmp


def test_interrupted_gen_leaves_no_journal(tmp_path):
    # EVERY syncs each record: ten million of them take far longer than the signal does to
    # arrive, so the run is always cut short (the wait below only guards against a hang).
    out = tmp_path / "flow.ofl"
    tmp = tmp_path / "flow.ofl.tmp"
    p = subprocess.Popen([bin_path(), "journal", "gen", "--count", "10000000", "--durability",
                          "every", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        wait_until(lambda: tmp.exists() or out.exists() or p.poll() is not None, "gen to start")
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=DEADLINE)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # (before the fix: OUT itself was being written, and what the signal left of it verified ok)
    assert not out.exists(), run("journal", "verify", out).stdout
    assert not tmp.exists()
    assert p.returncode == 130 and "interrupted" in err, (p.returncode, err)


def test_interrupted_gen_force_keeps_the_old_journal(tmp_path):
    out = tmp_path / "flow.ofl"
    assert run("journal", "gen", "--count", 100, out).returncode == 0
    before = out.read_bytes()
    p = subprocess.Popen([bin_path(), "journal", "gen", "--count", "10000000", "--durability",
                          "every", "--force", "--seed", "2", str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    tmp = tmp_path / "flow.ofl.tmp"
    try:
        wait_until(lambda: tmp.exists() or p.poll() is not None, "gen to start")
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=DEADLINE)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130
    assert out.read_bytes() == before and not tmp.exists()
    v = run("journal", "verify", out)
    assert v.returncode == 0 and "ok, 100 records" in v.stdout


def test_verify_reports_a_damaged_header(tmp_path):
    path = tmp_path / "flow.ofl"
    assert run("journal", "gen", "--count", 50, "--session", 77, path).returncode == 0
    good = path.read_bytes()
    v = run("journal", "verify", path)
    assert v.returncode == 0 and "session 77" in v.stdout and "header crc32c" in v.stdout
    assert good[:4] == b"OFL1" and good[15:19] == b"TFH\x01"
    for byte in range(23):  # magic, version, session id, clock kind, the block itself
        bad = bytearray(good)
        bad[byte] ^= 0x08
        path.write_bytes(bytes(bad))
        v = run("journal", "verify", path)
        assert v.returncode == 1 and "bad header" in v.stderr and "damaged" in v.stderr, byte
        assert v.stdout == ""


def test_verify_reads_a_journal_written_before_the_header_crc(tmp_path):
    new = tmp_path / "new.ofl"
    assert run("journal", "gen", "--count", 40, "--session", 5, new).returncode == 0
    old = tmp_path / "old.ofl"
    old.write_bytes(b"OFL1" + struct.pack("<HQB", 1, 5, 0) + new.read_bytes()[23:])
    v = run("journal", "verify", old)
    assert v.returncode == 0 and "ok, 40 records" in v.stdout and "unprotected" in v.stdout
    d = run("journal", "dump", old)
    assert d.returncode == 0 and len(d.stdout.splitlines()) == 40


def test_sweep_input_directory_says_so(tmp_path):
    r = run("sweep", "--input", tmp_path)
    assert r.returncode == 1
    assert "is a directory" in r.stderr.lower() and "Input/output error" not in r.stderr
    r = run("sweep", "--grid", tmp_path)
    assert r.returncode == 1
    assert "is a directory" in r.stderr.lower() and "Input/output error" not in r.stderr


def test_serve_refuses_a_port_out_of_range(tmp_path):
    r = run("serve", "--tcp", "127.0.0.1:99999")
    assert r.returncode == 1 and "99999" in r.stderr
    assert "listening" not in r.stdout + r.stderr
