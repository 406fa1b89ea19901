"""Parameter grids: HMA's six window lengths per combo (docs/definition.md section 2), and
named grids for any strategy (:func:`product`)."""
from __future__ import annotations

import math

import numpy as np

PARAM_NAMES = ("L", "half", "sq", "p", "p3", "p2")
DEFAULT_COMBOS = 80


def combo(L: int) -> tuple[int, int, int, int, int, int]:
    """The six lengths derived from one Hull length ``L`` (round half to even, each >= 1)."""
    L = int(L)
    if L < 1:
        raise ValueError(f"Hull length must be >= 1, got {L}")
    half = max(round(L / 2), 1)
    sq = max(round(math.sqrt(L)), 1)
    p = max(round(L / 2), 1)
    p3 = max(round(p / 3), 1)
    p2 = max(round(p / 2), 1)
    return (L, half, sq, p, p3, p2)


def lengths(lo: int, hi: int, n: int) -> list[int]:
    """``n`` Hull lengths from ``lo`` to ``hi``: ``lo + (j*(hi-lo))//(n-1)`` (= linspace(lo, hi, n).astype(int))."""
    if n < 1:
        raise ValueError("grid needs at least one combo")
    if n == 1:
        return [lo]
    return [lo + (j * (hi - lo)) // (n - 1) for j in range(n)]


def grid(lo: int, hi: int, n: int) -> np.ndarray:
    """int64 (n, 6): one combo per Hull length of :func:`lengths`."""
    return np.array([combo(L) for L in lengths(lo, hi, n)], dtype=np.int64).reshape(n, 6)


def default_grid() -> np.ndarray:
    """The default 80-combo grid, int64 (80, 6): L_j = 6 + (j*194)//79."""
    return grid(6, 200, DEFAULT_COMBOS)


MAX_COMBOS = 10_000_000  # TF_GRID_MAX_COMBOS


class ParamGrid(np.ndarray):
    """A float64 (n, k) grid that knows its parameter names (``names``): what :func:`product`
    returns. It is a numpy array in every other respect. Rows taken from it (``g[:10]``,
    ``g[mask]``) keep the names; anything that indexes its columns drops them (the strategy
    then reads the columns in its own order)."""

    names: tuple = ()

    def __array_finalize__(self, obj):
        names = getattr(obj, "names", ())
        self.names = names if self.ndim == 2 and self.shape[1] == len(names) else ()

    def __getitem__(self, key):
        out = super().__getitem__(key)
        if isinstance(out, ParamGrid) and isinstance(key, tuple) and not (
                len(key) == 1 or (len(key) == 2 and isinstance(key[1], slice)
                                  and key[1] == slice(None))):
            out.names = ()
        return out


def _values(name: str, r) -> list[float]:
    """One parameter's values: a range, a list/array of numbers, or a (lo, hi, step) tuple
    (inclusive, lo + k * step <= hi, each value computed as lo + k * step in doubles, as
    ``--grid name=LO:HI:STEP`` computes it)."""
    if isinstance(r, range):
        vals = [float(v) for v in r]
    elif isinstance(r, tuple):
        if len(r) != 3:
            raise ValueError(f"grid {name}: a tuple is (lo, hi, step), got {r!r}")
        lo, hi, step = (float(v) for v in r)
        if not all(np.isfinite((lo, hi, step))):
            raise ValueError(f"grid {name}: lo, hi and step must be finite, got {r!r}")
        if not step > 0.0:
            raise ValueError(f"grid {name}: step must be > 0, got {step!r}")
        if lo > hi:
            raise ValueError(f"grid {name}: lo {lo!r} > hi {hi!r}")
        if (hi - lo) / step + 1.0 > MAX_COMBOS:
            raise ValueError(f"grid {name}: more than {MAX_COMBOS} values: use a coarser step")
        vals, k = [], 0
        while lo + float(k) * step <= hi:
            vals.append(lo + float(k) * step)
            k += 1
    elif isinstance(r, (int, float, np.integer, np.floating)) and not isinstance(r, bool):
        vals = [float(r)]
    else:
        try:
            vals = [float(v) for v in np.asarray(r, dtype=np.float64).reshape(-1)]
        except (TypeError, ValueError):
            raise TypeError(f"grid {name}: want a range, a list of numbers or a (lo, hi, step) "
                            f"tuple, got {r!r}") from None
    if not vals:
        raise ValueError(f"grid {name}: no values")
    if not all(np.isfinite(vals)):
        raise ValueError(f"grid {name}: values must be finite")
    return vals


def product(*, where: str | None = None, strategy=None, **ranges) -> ParamGrid:
    """The cartesian product of named parameter ranges, the LAST parameter varying fastest: the
    rows ``tollfree sweep --grid a=LO:HI:STEP,b=... --where EXPR`` sweeps.

    Each range is a ``range``, a list of numbers, a single number or a ``(lo, hi, step)`` tuple
    (inclusive). Parameters come in the order given, or, with ``strategy=`` (a name, a path or
    a strategy object), in that strategy's order (every parameter must then be named once).
    ``where`` keeps the combos for which every condition holds (``"fast<slow"``; each
    condition is ``A OP B``, A and B parameter names or numbers, OP one of ``< <= > >= == !=``,
    conditions separated by ``,`` or ``&&``), evaluated by the library (``tf_grid_where``,
    the code behind ``--where``). Returns a float64 :class:`ParamGrid` (``.names`` the
    parameter names); more than 10,000,000 combos before ``where`` is a ``ValueError``."""
    if not ranges:
        raise ValueError("grid.product needs at least one parameter range")
    names = tuple(ranges)
    if strategy is not None:
        from tollfree.strategies import resolve
        r = resolve(strategy)
        unknown = [n for n in names if n not in r.param_names]
        missing = [n for n in r.param_names if n not in ranges]
        if unknown or missing:
            raise ValueError(f"strategy {r.name}'s parameters are {', '.join(r.param_names)}"
                             + (f"; unknown: {', '.join(unknown)}" if unknown else "")
                             + (f"; missing: {', '.join(missing)}" if missing else ""))
        names = r.param_names
    vals = [_values(n, ranges[n]) for n in names]
    total = 1
    for v in vals:
        total *= len(v)
    if total > MAX_COMBOS:
        raise ValueError(f"grid: {total} combos, more than {MAX_COMBOS}: use coarser steps")
    axes = np.meshgrid(*[np.array(v, dtype=np.float64) for v in vals], indexing="ij")
    g = np.ascontiguousarray(np.stack([a.reshape(-1) for a in axes], axis=1))
    if where is not None and where.strip():
        g = g[_where_keep(where, names, g)]
        if g.shape[0] == 0:
            raise ValueError(f"where {where!r} keeps none of the {total} combos of the grid")
    out = np.ascontiguousarray(g).view(ParamGrid)
    out.names = names
    return out


def _where_keep(where: str, names, g: np.ndarray) -> np.ndarray:
    import ctypes

    from tollfree.strategies import L
    raw = [n.encode() for n in names]
    arr = (ctypes.c_char_p * len(raw))(*raw)
    keep = np.zeros(g.shape[0], dtype=np.uint8)
    buf = ctypes.create_string_buffer(1024)
    rc = L().tf_grid_where(where.encode(), arr, len(raw), g.ctypes.data, g.shape[0],
                           keep.ctypes.data, buf, len(buf))
    if rc:
        raise ValueError(buf.value.decode(errors="replace") or f"where {where!r}: error {rc}")
    return keep.astype(bool)


def named(strategy, spec: str, where: str | None = None) -> ParamGrid:
    """The grid ``--grid spec --where where`` gives for ``strategy`` (a name, a path or a
    strategy object): ``"a=LO:HI:STEP,b=V"`` parsed and built by the library
    (``tf_grid_named``), the command's own code. ValueError with its message."""
    import ctypes

    from tollfree.strategies import L, resolve
    r = resolve(strategy)
    out = ctypes.POINTER(ctypes.c_double)()
    n = ctypes.c_int64()
    buf = ctypes.create_string_buffer(1024)
    rc = L().tf_grid_named(r.ptr, spec.encode(), (where or "").encode(), ctypes.byref(out),
                           ctypes.byref(n), buf, len(buf))
    if rc:
        raise ValueError(buf.value.decode(errors="replace") or f"grid {spec!r}: error {rc}")
    try:
        g = np.ctypeslib.as_array(out, (n.value, r.n_params)).copy() if n.value else \
            np.empty((0, r.n_params))
    finally:
        ctypes.CDLL(None).free(out)
    g = np.ascontiguousarray(g).view(ParamGrid)
    g.names = r.param_names
    return g
