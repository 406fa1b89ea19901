"""Price files as people have them, read by the CLI (src/cli/input.c) and by Python
(tollfree.data.read_prices) with the same rules and the same bits."""
import subprocess

import numpy as np
import pandas as pd
import pytest

import tollfree
from tollfree import data
from tollfree._lib import bin_path
from conftest import DEADLINE  # noqa: E402

GRID = "4:40:5"


def cli(*args, stdin=None):
    return subprocess.run([bin_path(), "sweep", "--threads", "1", "--quiet", *args],
                          capture_output=True, timeout=DEADLINE, input=stdin)


def rows(out: bytes):
    lines = out.decode().strip().splitlines()[1:]
    return np.array([float(ln.split(",")[6]) for ln in lines]), \
        np.array([int(ln.split(",")[7]) for ln in lines])


def want(close):
    from tollfree.research import parse_grid
    return tollfree.sweep(np.ascontiguousarray(close), parse_grid(GRID))


def same(a, b):
    return np.array_equal(np.asarray(a, np.float64).view(np.int64),
                          np.asarray(b, np.float64).view(np.int64))


C = data.generate_close(600, seed=3)
DATES = pd.date_range("2020-01-01", periods=600, freq="h").strftime("%Y-%m-%d %H:%M:%S").tolist()


def body(close=C, dates=DATES, nl="\n"):
    return nl.join(f'{d},1,"{x!r}",7' for d, x in zip(dates, close)) + nl


@pytest.mark.parametrize("name,text,column", [
    ("plain", "date,open,close,volume\n" + body(), None),
    ("Close and CRLF", "Date,Open,Close,Volume\r\n" + body(nl="\r\n"), None),
    ("BOM, quotes, blank lines", "\ufeff\"Date\",\"Open\",\"Adj Close\",\"Vol\"\n\n"
     + body().replace("\n", "\n\n", 7), "adj close"),
    ("no header, index", body(), "3"),
], ids=["plain", "Close-CRLF", "BOM-quotes-blank", "no-header"])
def test_formats_read_the_same_by_cli_and_python(tmp_path, name, text, column):
    f = tmp_path / "p.csv"
    f.write_bytes(text.encode("utf-8"))
    args = ["--input", str(f), "--grid", GRID] + (["--column", column] if column else [])
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    pnl, trades = rows(r.stdout)
    p = data.read_prices(str(f), column or "close")
    assert same(p.close, C)
    wp, wt = want(C)
    assert same(pnl, wp) and np.array_equal(trades, wt)
    if column != "3":
        assert p.dates == DATES


def test_stdin_and_one_column_file():
    r = cli("--input", "-", "--grid", GRID, stdin=("".join(f"{x!r}\n" for x in C)).encode())
    assert r.returncode == 0, r.stderr
    assert same(rows(r.stdout)[0], want(C)[0])


def test_newest_first_is_reversed_and_said(tmp_path):
    f = tmp_path / "rev.csv"
    f.write_text("Date,Close\n" + "".join(f"{d},{x!r}\n" for d, x in
                                          zip(DATES[::-1], C[::-1])))
    r = subprocess.run([bin_path(), "sweep", "--input", str(f), "--grid", GRID, "--threads", "1"],
                       capture_output=True, text=True, timeout=DEADLINE)
    assert r.returncode == 0 and "newest first" in r.stderr and "reversed" in r.stderr
    assert same(rows(r.stdout.encode())[0], want(C)[0])
    p = data.read_prices(str(f))
    assert p.reversed and same(p.close, C) and p.dates == DATES


BAD = [
    ("nan", "NaN is not a price"), ("inf", "not a finite"), ("-5", "not a positive price"),
    ("0", "not a positive price"), ("1e400", "not a finite"), ("abc", "not a number"),
    ("", "empty cell"), ("1_000", "not a number"),
]


@pytest.mark.parametrize("cell,needle", BAD, ids=[c or "empty" for c, _ in BAD])
def test_bad_cells_name_line_and_column(tmp_path, cell, needle):
    f = tmp_path / "bad.csv"
    f.write_text("Date,Open,Close\n2020-01-01,1,100\n2020-01-02,1,101\n"
                 f"2020-01-03,1,{cell}\n2020-01-04,1,102\n")
    r = cli("--input", str(f))
    err = r.stderr.decode()
    assert r.returncode == 1 and r.stdout == b""
    assert f"bad.csv:4: column 3 'Close': {needle}" in err and len(err.splitlines()) == 1, err
    with pytest.raises(data.BadInput, match=f"bad.csv:4: column 3 'Close': {needle}"):
        data.read_prices(str(f))
    # skipped and counted, with the same bars on both sides
    r = subprocess.run([bin_path(), "sweep", "--input", str(f), "--skip-bad-rows", "--grid",
                        "1:2:2"], capture_output=True, text=True, timeout=DEADLINE)
    assert r.returncode == 0 and "skipped 1 bad rows" in r.stderr and "line 4" in r.stderr
    assert same(data.read_prices(str(f), skip_bad_rows=True, warn=lambda s: None).close,
                [100.0, 101.0, 102.0])


@pytest.mark.parametrize("text,needle", [
    ("Date,Price\n2020-01-01,1\n", "no column 'close' in the header line; columns: 'Date', 'Price'"),
    ("Date,Close\n2020-01-02,1\n2020-01-03,2\n2020-01-01,3\n", "p.csv:4: column 1 'Date': dates out of order"),
    ("Date,Close\n", "empty input"),
    ("a,b\n1,2\n", "no column 'close'"),
    ("1,2\n3,4\n", "no header line and 2 columns"),
    ('Date,Close\n2020-01-01,"12\n', "unclosed quote"),
], ids=["no-close", "out-of-order", "header-only", "other-columns", "no-header-2-cols",
        "unclosed-quote"])
def test_refused_files(tmp_path, text, needle):
    f = tmp_path / "p.csv"
    f.write_text(text)
    r = cli("--input", str(f))
    assert r.returncode == 1 and needle in r.stderr.decode(), r.stderr
    if "unclosed" not in needle:
        with pytest.raises(data.BadInput, match=needle.replace("(", r"\(")):
            data.read_prices(str(f))


def test_binary_garbage_and_raw_checks(tmp_path):
    f = tmp_path / "noise.csv"
    f.write_bytes(bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8)))
    r = cli("--input", str(f))
    assert r.returncode == 1 and b"binary data" in r.stderr and b"--raw" in r.stderr
    with pytest.raises(data.BadInput, match="binary data"):
        data.read_prices(str(f))
    raw = tmp_path / "p.f64"
    np.array([100.0, np.nan, 101.0]).tofile(raw)
    r = cli("--input", str(raw))
    assert r.returncode == 1 and b"value 2 (byte 8)" in r.stderr
    with pytest.raises(data.BadInput, match=r"value 2 \(byte 8\)"):
        data.read_prices(str(raw))


def test_unknown_output_format_is_an_error(tmp_path):
    r = cli("--out", str(tmp_path / "r.parquet"))
    assert r.returncode == 2 and b"unknown output format '.parquet'" in r.stderr
    assert not (tmp_path / "r.parquet").exists()


def test_python_accepts_pandas_and_sequences():
    s = pd.Series(C[:50])
    df = pd.DataFrame({"Date": DATES[:50], "Close": C[:50]})
    for x in (s, df, list(C[:50]), tuple(C[:50])):
        assert same(data.to_close(x), C[:50])
    assert same(data.to_close(np.arange(1, 4, dtype=np.int32)), [1.0, 2.0, 3.0])
    assert same(data.to_close(C[:100][::2]), C[:100:2])  # strided: copied once
    assert data.to_close(C) is C  # float64 C-contiguous: no copy
    with pytest.raises(data.BadInput, match=r"close\[2\]"):
        data.to_close([1.0, 2.0, 0.0])


def test_csv_is_streamed_memory_holds_the_close_column_only():
    """42 MB of CSV through a pipe: the reader's peak memory stays near the 4.8 MB close column
    (a slurping reader would need the 42 MB). Measured as the child's max RSS, never time."""
    import sys
    rows, close_mb = 600_000, 600_000 * 8 / 1e6
    code = f"""
import resource, subprocess, sys
p = subprocess.Popen([{bin_path()!r}, "sweep", "--input", "-", "--grid", "1:1:1", "--threads",
                      "1", "--quiet"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
line = b"2020-01-01 00:00:00,100.1234,100.2234,100.0234,%d.1234,100.123456,123456\\n"
p.stdin.write(b"Date,Open,High,Low,Close,Adj Close,Volume\\n")
for k in range({rows} // 1000):
    p.stdin.write(b"".join(line % (100 + (k + i) % 7) for i in range(1000)))
p.stdin.close()
assert p.wait() == 0
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=DEADLINE)
    assert r.returncode == 0, r.stderr
    peak_mb = int(r.stdout) / 1024
    assert peak_mb < close_mb + 16, f"peak {peak_mb:.1f} MB for a {close_mb:.1f} MB column"
