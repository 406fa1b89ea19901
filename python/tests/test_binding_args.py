"""The in-process binding refuses bad arguments with TypeError/ValueError that say what is wrong,
and the same way everywhere (one check per argument kind: binding.as_params, as_combo,
as_threads), and a closed Strategy raises instead of passing NULL to the library."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import tollfree
from tollfree import binding

COMBO = (6, 3, 2, 3, 1, 2)
CLOSE = np.linspace(100.0, 120.0, 500) + np.sin(np.arange(500)) * 3.0


def test_strategy_after_close_raises():
    s = tollfree.Strategy(COMBO)
    s.on_bar(100.0)
    s.close()
    for call in (lambda: s.on_bar(101.0), s.reset, lambda: s.pnl, lambda: s.trades,
                 lambda: s.bars):
        with pytest.raises(ValueError, match="Strategy is closed"):
            call()
    s.close()  # twice is fine


def test_strategy_on_bar_refuses_non_numbers():
    s = tollfree.Strategy(COMBO)
    for bad in ("abc", b"1", None, [1.0]):
        with pytest.raises(TypeError, match="close must be a real number, got"):
            s.on_bar(bad)
    assert s.bars == 0


def test_strategy_on_bar_takes_any_real():
    a, b = tollfree.Strategy(COMBO), tollfree.Strategy(COMBO)
    for x in CLOSE.astype(np.float32):
        assert a.on_bar(x) == b.on_bar(float(x))
    a.on_bar(Fraction(101, 1))
    b.on_bar(101.0)
    assert (a.pnl, a.trades, a.bars) == (b.pnl, b.trades, b.bars)


@pytest.mark.parametrize("params", [(6.0, 3, 2, 3, 1, 2), np.array(COMBO, dtype=np.float64),
                                    ("6", "3", "2", "3", "1", "2")])
def test_strategy_refuses_float_params_as_sweep_does(params):
    with pytest.raises(TypeError, match="integer window lengths"):
        tollfree.Strategy(params)
    with pytest.raises(TypeError):
        tollfree.sweep(CLOSE, np.asarray(params).reshape(1, 6))


@pytest.mark.parametrize("params,msg", [((6, 3, 2, 3, 1), "six window lengths, got 5"),
                                        ((6, 3, 2, 3, 1, 0), "must be >= 1, got 0"),
                                        ((6, 3, 2, 3, 1, 2**31 + 1), r"must be <= 2\*\*31")])
def test_strategy_range_errors_match_sweep(params, msg):
    with pytest.raises(ValueError, match=msg):
        tollfree.Strategy(params)


def test_strategy_int_params_match_sweep():
    s = tollfree.Strategy(np.array(COMBO, dtype=np.int32))
    for x in CLOSE:
        s.on_bar(x)
    pnl, trades = tollfree.sweep(CLOSE, np.array([COMBO], dtype=np.int64), threads=1)
    assert (s.pnl, s.trades) == (pnl[0], trades[0])


@pytest.mark.parametrize("threads,exc,msg", [(1.5, TypeError, "threads must be an integer"),
                                             ("2", TypeError, "threads must be an integer"),
                                             (True, TypeError, "threads must be an integer"),
                                             (-1, ValueError, "threads must be >= 0, got -1")])
def test_threads_checked_everywhere(threads, exc, msg):
    params = np.array([COMBO], dtype=np.int64)
    with pytest.raises(exc, match=msg):
        tollfree.sweep(CLOSE, params, threads=threads)
    with binding.Series(CLOSE) as ser:
        with pytest.raises(exc, match=msg):
            ser.sweep(params, threads=threads)
    with pytest.raises(exc, match=msg):
        binding.as_threads(threads)


def test_threads_numpy_integer_accepted():
    params = np.array([COMBO], dtype=np.int64)
    assert binding.as_threads(np.int64(2)) == 2
    assert binding.as_threads(None) == 0
    p1, t1 = tollfree.sweep(CLOSE, params, threads=np.int32(1))
    p2, t2 = tollfree.sweep(CLOSE, params, threads=1)
    assert (p1[0], t1[0]) == (p2[0], t2[0])
