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


# ---- issue 21: one reader in the library; the file shapes that gave wrong answers ----

def both_refuse(path, needle, *args, **kw):
    """The CLI exits 1 with one 'tollfree: ' line holding needle; Python raises BadInput with it."""
    r = cli("--input", str(path), "--grid", "1:2:2", *args)
    err = r.stderr.decode()
    assert r.returncode == 1 and r.stdout == b"", err
    assert needle in err and err.startswith("tollfree: ") and len(err.splitlines()) == 1, err
    with pytest.raises(data.BadInput) as e:
        data.read_prices(str(path), warn=lambda s: None, **kw)
    assert needle in str(e.value)
    return err


def both_read(path, close, *args, **kw):
    """The CLI's sweep and Python's read give the bars of close, bit for bit."""
    r = cli("--input", str(path), "--grid", GRID, *args)
    assert r.returncode == 0, r.stderr
    assert same(rows(r.stdout)[0], want(close)[0])
    notes = []
    p = data.read_prices(str(path), warn=notes.append, **kw)
    assert same(p.close, close)
    return p, r.stderr.decode(), notes


IDX = pd.date_range("2021-03-01", periods=600, freq="D")


def test_pandas_to_csv_index_is_the_date_column(tmp_path):
    df = pd.DataFrame({"Open": C, "Close": C}, index=IDX)
    f = tmp_path / "pd.csv"
    df.to_csv(f)
    assert f.read_text().startswith(",Open,Close\n")
    p, _, _ = both_read(f, C)
    assert p.date_checked and p.date_column == "" and p.dates[0] == "2021-03-01"
    assert np.array_equal(p.times, IDX.values)
    for dc in ("1", ""):  # the column by number and by its (empty) name
        both_read(f, C, "--date-column", dc, date_column=dc)
    shuffled = tmp_path / "shuffled.csv"
    df.sample(frac=1, random_state=1).to_csv(shuffled)
    both_refuse(shuffled, "column 1 '': dates out of order")
    newest = tmp_path / "newest.csv"
    df[::-1].to_csv(newest)
    p, err, notes = both_read(newest, C)
    assert p.reversed and "newest first" in err and any("newest first" in n for n in notes)


def test_rows_longer_or_shorter_than_the_header_are_refused(tmp_path):
    f = tmp_path / "long.csv"
    f.write_text("Date,Open,Close\n2024-01-01,1,100\n2024-01-02,1,1,234.5\n2024-01-03,1,101\n")
    err = both_refuse(f, "long.csv:3: 4 fields where the header line has 3")
    assert "thousands separator" in err and "'2024-01-02,1,1,234.5'" in err
    # not skippable: skipping every price above 999 would change the answer silently
    both_refuse(f, "4 fields", "--skip-bad-rows", skip_bad_rows=True)
    f.write_text("Date,Open,Close\n2024-01-01,1,100\n2024-01-02,1\n")
    both_refuse(f, "long.csv:3: 2 fields where the header line has 3")
    f.write_text("2024-01-01,1,100\n2024-01-02,1,101,7\n")  # no header: the first row's count
    both_refuse(f, "long.csv:2: 4 fields where the first row has 3", "--column", "3",
                column="3")


def dated(tmp_path, name, dates, close=None, header="Date,Close", sep=","):
    close = C[:len(dates)] if close is None else close
    f = tmp_path / name
    f.write_text(header + "\n" + "".join(f"{d}{sep}{x!r}\n" for d, x in zip(dates, close)))
    return f


FORMS = {  # strftime forms of IDX (600 days from 2021-03-01) and the date_form the reader names
    "iso": ("%Y-%m-%d", "YYYY-MM-DD"), "iso-time": ("%Y-%m-%dT%H:%M:%SZ", "YYYY-MM-DD"),
    "slashes": ("%Y/%m/%d", "YYYY-MM-DD"), "compact": ("%Y%m%d", "YYYYMMDD"),
    "us": ("%m/%d/%Y", "MM/DD/YYYY"), "eu": ("%d/%m/%Y", "DD/MM/YYYY"),
    "dots": ("%d.%m.%Y", "DD.MM.YYYY"), "dd-mon": ("%d-%b-%Y", "DD-Mon-YYYY"),
    "mon-dd": ("%b %d %Y", "Mon DD YYYY"), "day-month": ("%-d %B %Y", "DD-Mon-YYYY"),
}


@pytest.mark.parametrize("form", FORMS)
def test_dates_in_any_common_form_are_parsed_and_their_order_checked(tmp_path, form):
    fmt, name = FORMS[form]
    dates = IDX.strftime(fmt).tolist()
    p, _, _ = both_read(dated(tmp_path, "ok.csv", dates), C)
    assert p.date_checked and p.date_form == name and p.dates == dates
    assert np.array_equal(p.times, IDX.values)
    order = np.random.default_rng(5).permutation(600)
    both_refuse(dated(tmp_path, "shuffled.csv", [dates[i] for i in order], C[order]),
                "dates out of order")
    p, err, _ = both_read(dated(tmp_path, "newest.csv", dates[::-1], C[::-1]), C)
    assert p.reversed and "reversed to oldest first" in err


def test_epoch_numbers_and_offsets_become_the_same_times(tmp_path):
    secs = (IDX.values.astype(np.int64) // 10**9).tolist()
    for unit, scale in (("s", 1), ("ms", 1000)):
        p, _, _ = both_read(dated(tmp_path, f"{unit}.csv", [s * scale for s in secs]), C)
        assert np.array_equal(p.times, IDX.values), unit
    local = (IDX + pd.Timedelta(hours=2)).strftime("%Y-%m-%d %H:%M:%S+02:00").tolist()
    p, _, _ = both_read(dated(tmp_path, "tz.csv", local), C)
    assert np.array_equal(p.times, IDX.values)


def test_unreadable_dates_are_refused_with_what_to_do(tmp_path):
    f = dated(tmp_path, "q.csv", [f"Q{i % 4 + 1} {2000 + i}" for i in range(600)])
    err = both_refuse(f, "q.csv:2: column 1 'Date': not a date tollfree reads: 'Q1 2000'")
    assert "--date-column none" in err and "--assume-sorted" in err
    p, err, notes = both_read(f, C, "--assume-sorted", assume_sorted=True)
    assert p.assumed_sorted and not p.date_checked and p.times is None
    assert "--assume-sorted" in err and any("--assume-sorted" in n for n in notes)
    p, _, _ = both_read(f, C, "--date-column", "none", date_column="none")
    assert not p.date_checked
    g = dated(tmp_path, "mixed.csv", DATES[:5] + ["01/06/2020"] + DATES[6:600])
    both_refuse(g, "mixed.csv:7: column 1 'Date': not a date like the rows before")


def test_month_or_day_first_is_decided_by_the_file(tmp_path):
    # Nothing above 12 and both readings in order: accepted, and said
    dates = ["01/02/2024", "01/03/2024", "01/04/2024"]
    p, err, _ = both_read(dated(tmp_path, "amb.csv", dates, C[:3]), C[:3])
    assert p.date_form == "MM/DD/YYYY?" and "month-first or day-first" in err
    # Nothing above 12 and the readings disagree: refused
    both_refuse(dated(tmp_path, "amb2.csv", ["01/02/2024", "02/01/2024", "03/01/2024"], C[:3]),
                "month-first or day-first?")
    # A day above 12 later decides day-first for the rows before it, whose order then counts
    both_refuse(dated(tmp_path, "dmy.csv", ["01/02/2024", "02/01/2024", "03/01/2024",
                                            "14/01/2024"], C[:4]),
                "dmy.csv:4: column 1 'Date': dates out of order ('03/01/2024' after "
                "'02/01/2024', read day-first as line 5 shows)")
    both_refuse(dated(tmp_path, "mix.csv", ["13/01/2024", "01/14/2024"], C[:2]),
                "a month-first date after day-first ones")


@pytest.mark.parametrize("sep,name", [(";", "semi"), ("\t", "tab")])
def test_semicolon_and_tab_files(tmp_path, sep, name):
    f = dated(tmp_path, f"{name}.csv", DATES, header=f"Date{sep}Close", sep=sep)
    p, err, _ = both_read(f, C)
    assert p.sep == sep and "separator" in err and p.dates == DATES
    arg = "tab" if sep == "\t" else sep
    p, err, _ = both_read(f, C, "--sep", arg, sep=arg)
    assert "separator" not in err  # said only when found, not when given
    both_refuse(f, "no column 'close'", "--sep", ",", sep=",")


def test_decimal_commas_are_refused_with_a_hint(tmp_path):
    f = tmp_path / "dec.csv"
    f.write_text("Date;Close\n2024-01-02;1,5\n2024-01-03;1,6\n")
    err = both_refuse(f, "dec.csv:2: column 2 'Close': a comma in a number: '1,5'")
    assert "decimal comma" in err and "1234.5" in err


def test_bad_sep_option():
    r = cli("--sep", "|")
    assert r.returncode == 2 and b"--sep wants" in r.stderr
    with pytest.raises(ValueError, match="sep wants"):
        data.read_prices("x.csv", sep="|")


def test_python_buffers_and_file_objects_read_as_files(tmp_path):
    text = ("Date,Close\n" + "".join(f"{d},{x!r}\n" for d, x in zip(DATES, C))).encode()
    p = data.read_prices(text)
    assert same(p.close, C) and p.dates == DATES
    f = tmp_path / "p.csv"
    f.write_bytes(text)
    with open(f, "rb") as fo:
        assert same(data.read_prices(fo).close, C)
    with pytest.raises(data.BadInput, match=r"^<buffer>:3: column 2 'Close': not a number"):
        data.read_prices(b"Date,Close\n2020-01-01,1\n2020-01-02,x\n")
    with pytest.raises(FileNotFoundError):
        data.read_prices(str(tmp_path / "missing.csv"))


def test_to_close_validates_through_the_library():
    s = pd.Series([100.0, 101.0, -5.0], index=pd.date_range("2024-01-01", periods=3))
    with pytest.raises(data.BadInput, match=r"close\[2\] \(index label Timestamp\('2024-01-03"):
        data.to_close(s)
    with pytest.raises(data.BadInput, match="not a positive price"):
        data.to_close(pd.DataFrame({"CLOSE": s}))
    with pytest.raises(data.BadInput, match=r"close\[1\] = nan: NaN"):
        data.to_close(np.array([1.0, np.nan]))
    raw = data.to_close(s, validate=False)  # the raw path: no check, the values as they are
    assert raw.flags.c_contiguous and raw.dtype == np.float64 and raw[2] == -5.0
    assert data.first_bad(np.array([1.0, 2.0])) is None and data.first_bad(np.array([1, 0.0])) == 1
    with pytest.raises(data.BadInput, match="numbers"):
        data.to_close(["1", "x"])


def test_python_constants_match_prices_h():
    import re
    from pathlib import Path
    h = (Path(__file__).resolve().parents[2] / "include" / "tollfree" / "prices.h").read_text()
    found = dict(re.findall(r"\bTF_(PRICES_[A-Z_]+) = (\d+)", h))
    assert len(found) == 17
    for name, value in found.items():
        assert getattr(data, name) == int(value), name
