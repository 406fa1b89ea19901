"""Strategies for every Python path: what ``strategy=`` names, and strategies written in Python.

``strategy=`` on :func:`tollfree.sweep`, :func:`tollfree.sweep_stats`, :class:`tollfree.Strategy`
and the paths built on them takes:

- ``None`` or ``"hma"``: HMA/HMA3 (six integer window lengths, the fast path and its bits);
- a built-in name: ``"sma_cross"``, ``"ema_cross"``, ``"donchian"``, ``"rsi"``, ``"bollinger"``
  (:func:`builtins` lists them; docs/strategies.md defines them);
- a path to a plugin (a string holding ``/`` or ending in ``.so``, or a ``pathlib.Path``): a C
  shared object exporting ``tollfree_strategy`` (``tf_strategy_load``: the ABI is checked);
- a :class:`UserStrategy` made by :func:`define` from two functions, ``init(state, params) ->
  int`` (0, or nonzero: these params are invalid) and ``step(state, close) -> int`` (-1, 0, +1 or
  :data:`HOLD`). Functions decorated with ``numba.njit`` are compiled with ``numba.cfunc`` to C
  callables that the library's sweep calls from its own threads, without the GIL, at C speed.
  Plain Python functions run on a slow path (ctypes callbacks, one thread) and say so in a
  warning.

``params`` is then an (n, k) float64 array in the strategy's parameter order (integer arrays
are accepted and converted); HMA keeps its int64 (n, 6) grids.
"""
from __future__ import annotations

import ctypes
import os
import re
import threading
import warnings

import numpy as np

from tollfree._lib import lib

__all__ = ["HOLD", "builtins", "define", "resolve", "is_path", "spec_of", "UserStrategy",
           "Resolved"]

HOLD = 2  # TF_HOLD
ABI = 1  # TF_STRATEGY_ABI
MAX_PARAMS = 64  # TF_STRATEGY_MAX_PARAMS
E_STRATEGY = -1107  # TF_E_STRATEGY
_MSG = 1024
_NAME = re.compile(r"[a-z0-9_]+\Z")

INIT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_double))
STEP_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_double)
STEPS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_double),
                            ctypes.c_int64, ctypes.POINTER(ctypes.c_int32))
CHANGES_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                              ctypes.POINTER(ctypes.c_double), ctypes.c_int64,
                              ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int32),
                              ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int64))
# Combos per call of a numba strategy's changes (float64 state): their steps are independent, so
# the CPU overlaps them; a step's chain of dependent operations (the state through memory) is
# what a single combo's loop waits on.
LANES = 4


class StrategyDef(ctypes.Structure):  # tf_strategy_def
    _fields_ = [("size", ctypes.c_size_t), ("abi", ctypes.c_uint32), ("name", ctypes.c_char_p),
                ("n_params", ctypes.c_uint32),
                ("param_names", ctypes.POINTER(ctypes.c_char_p)),
                ("state_size", ctypes.c_size_t), ("init", INIT_FN), ("step", STEP_FN),
                ("state_bytes", ctypes.c_void_p), ("steps", STEPS_FN),
                ("lanes", ctypes.c_uint32), ("changes", CHANGES_FN)]


_declared = None


def L() -> ctypes.CDLL:
    """The library with strategy.h's prototypes declared (once)."""
    global _declared
    if _declared is None:
        c, p, i64, sz = ctypes, ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t
        lb = lib()
        lb.tf_strategy_builtin.argtypes, lb.tf_strategy_builtin.restype = [c.c_char_p], p
        lb.tf_strategy_builtin_name.argtypes = [c.c_int]
        lb.tf_strategy_builtin_name.restype = c.c_char_p
        lb.tf_strategy_def_check.argtypes = [p, c.c_char_p, sz]
        lb.tf_strategy_load.argtypes = [c.c_char_p, c.POINTER(p), c.c_char_p, sz]
        lb.tf_strategy_lib_def.argtypes, lb.tf_strategy_lib_def.restype = [p], p
        lb.tf_strategy_unload.argtypes, lb.tf_strategy_unload.restype = [p], None
        lb.tf_strategy_resolve.argtypes = [c.c_char_p, c.POINTER(p), c.POINTER(p), c.c_char_p,
                                           sz]
        lb.tf_strategy_params_check.argtypes = [p, p, i64, c.POINTER(i64), c.c_char_p, sz]
        lb.tf_sweep_with.argtypes = [p, p, i64, p, i64, p, p, p]
        lb.tf_sweep_with_reference.argtypes = [p, p, i64, p, i64, p, p, p]
        lb.tf_strategy_open_with.argtypes = [c.POINTER(p), p, p]
        lb.tf_grid_where.argtypes = [c.c_char_p, c.POINTER(c.c_char_p), c.c_uint32, p, i64, p,
                                     c.c_char_p, sz]
        lb.tf_grid_named.argtypes = [p, c.c_char_p, c.c_char_p, c.POINTER(c.POINTER(c.c_double)),
                                     c.POINTER(i64), c.c_char_p, sz]
        _declared = lb
    return _declared


def builtins() -> tuple[str, ...]:
    """The built-in strategies' names, as the library lists them."""
    out, k = [], 0
    while True:
        name = L().tf_strategy_builtin_name(k)
        if name is None:
            return tuple(out)
        out.append(name.decode())
        k += 1


class Resolved:
    """A strategy ready for the library: ``ptr`` is the address of its ``tf_strategy_def``,
    valid as long as this object lives (it keeps the plugin open, or the compiled functions
    alive). ``kind`` is ``builtin``, ``plugin``, ``numba`` or ``python``; ``spec`` is what
    names it across processes (a built-in name, a plugin path, or the :class:`UserStrategy`)."""

    def __init__(self, ptr: int, kind: str, spec, keep=()):
        self.ptr = ptr
        self.kind = kind
        self.spec = spec
        self._keep = keep
        d = ctypes.cast(ptr, ctypes.POINTER(StrategyDef)).contents
        self.name = d.name.decode()
        self.param_names = tuple(d.param_names[k].decode() for k in range(d.n_params))

    @property
    def n_params(self) -> int:
        return len(self.param_names)

    @property
    def is_hma(self) -> bool:
        return self.kind == "builtin" and self.name == "hma"

    def params(self, params, what: str = "params") -> np.ndarray:
        """``params`` as a C-contiguous float64 (n, k) array, k checked (a copy only when the
        input is not one already). A grid that names its columns (``.names``, a
        :func:`tollfree.grid.product` grid) is matched by name: its columns are put in the
        strategy's order, and other names are refused."""
        names = tuple(getattr(params, "names", ()) or ())
        a = np.asarray(params)
        if names and names != self.param_names and a.ndim == 2 and len(names) == a.shape[1]:
            if sorted(names) != sorted(self.param_names):
                raise ValueError(f"strategy {self.name}'s parameters are "
                                 f"{', '.join(self.param_names)}; the grid's columns are "
                                 f"{', '.join(names)}")
            a = a[:, [names.index(n) for n in self.param_names]]
        if a.dtype.kind not in "iuf" or a.dtype == np.float16:
            raise TypeError(f"{what} must be numbers (an (n, {self.n_params}) float64 array in "
                            f"the order {', '.join(self.param_names)}), got dtype {a.dtype}")
        if a.ndim == 1 and self.n_params == 1:
            a = a.reshape(-1, 1)
        if a.ndim != 2 or a.shape[1] != self.n_params:
            raise ValueError(f"strategy {self.name} takes {self.n_params} parameter"
                             f"{'s' if self.n_params != 1 else ''} "
                             f"({', '.join(self.param_names)}): {what} must have shape "
                             f"(n_combos, {self.n_params}), got {a.shape}")
        return np.ascontiguousarray(a, dtype=np.float64)

    def combo(self, given, what: str = "params") -> np.ndarray:
        """One combo as float64[1, k]: numbers in the parameter order, or a dict naming each
        parameter once."""
        if isinstance(given, dict):
            unknown = sorted(set(given) - set(self.param_names))
            missing = [n for n in self.param_names if n not in given]
            if unknown or missing:
                raise ValueError(f"strategy {self.name}'s parameters are "
                                 f"{', '.join(self.param_names)}"
                                 + (f"; unknown: {', '.join(map(str, unknown))}" if unknown
                                    else "")
                                 + (f"; missing: {', '.join(missing)}" if missing else ""))
            given = [given[n] for n in self.param_names]
        a = np.asarray(given)
        if a.dtype.kind not in "iuf":
            raise TypeError(f"{what} must be numbers, got {given!r}")
        return self.params(a.astype(np.float64).reshape(1, -1), what)

    def refusal(self, params: np.ndarray) -> str | None:
        """The library's line naming the first combo ``init`` refuses, or None."""
        bad = ctypes.c_int64(-1)
        buf = ctypes.create_string_buffer(_MSG)
        rc = L().tf_strategy_params_check(self.ptr, params.ctypes.data, params.shape[0],
                                          ctypes.byref(bad), buf, _MSG)
        if rc == 0:
            return None
        return buf.value.decode(errors="replace") or f"strategy {self.name}: combo {bad.value} " \
            f"refused"

    def __repr__(self) -> str:
        return f"<strategy {self.name} ({self.kind}): {', '.join(self.param_names)}>"


_PLUGINS: dict[str, Resolved] = {}
_BUILTINS: dict[str, Resolved] = {}
_LOCK = threading.Lock()


class _Plugin:
    """Keeps a plugin's shared object open; unloads it when the last user is gone."""

    def __init__(self, handle: ctypes.c_void_p):
        self.handle = handle

    def __del__(self):
        if self.handle:
            L().tf_strategy_unload(self.handle)
            self.handle = None


def _builtin(name: str) -> Resolved:
    r = _BUILTINS.get(name)
    if r is None:
        ptr = L().tf_strategy_builtin(name.encode())
        if not ptr:
            raise ValueError(f"unknown strategy {name!r}; built-ins: {', '.join(builtins())} "
                             "(or a path to a plugin .so, or tollfree.strategies.define(...))")
        r = _BUILTINS[name] = Resolved(ptr, "builtin", name)
    return r


def _plugin(path: str) -> Resolved:
    key = os.path.realpath(path)
    with _LOCK:
        r = _PLUGINS.get(key)
        if r is not None:
            return r
        h = ctypes.c_void_p()
        buf = ctypes.create_string_buffer(_MSG)
        rc = L().tf_strategy_load(path.encode(), ctypes.byref(h), buf, _MSG)
        if rc:
            from tollfree.binding import KernelError
            raise KernelError(rc, "strategy", buf.value.decode(errors="replace") or None)
        keep = _Plugin(h)
        r = _PLUGINS[key] = Resolved(L().tf_strategy_lib_def(h), "plugin", path, keep)
        return r


def is_path(name: str) -> bool:
    """A strategy name that is a plugin path: holds a '/' or ends in '.so' (tf_strategy_resolve's
    rule)."""
    return "/" in name or name.endswith(".so")


def resolve(strategy=None) -> Resolved:
    """What ``strategy=`` names (module docstring), ready for the library. Plugins are loaded
    once per process (by real path) and stay loaded."""
    if isinstance(strategy, Resolved):
        return strategy
    if strategy is None:
        return _builtin("hma")
    if isinstance(strategy, os.PathLike):
        return _plugin(os.fspath(strategy))
    if isinstance(strategy, str):
        return _plugin(strategy) if is_path(strategy) else _builtin(strategy)
    if isinstance(strategy, UserStrategy):
        return strategy.resolved()
    if all(hasattr(strategy, a) for a in ("init", "step", "param_names")):
        return define(getattr(strategy, "name", type(strategy).__name__.lower()),
                      strategy.param_names, strategy.init, strategy.step,
                      state=getattr(strategy, "state", 1)).resolved()
    raise TypeError(f"strategy must be a built-in name ({', '.join(builtins())}), a path to a "
                    f"plugin .so, or tollfree.strategies.define(...), got {strategy!r}")


def spec_of(strategy):
    """What names ``strategy`` in another process (Dask): a name or path string, or the
    :class:`UserStrategy` itself (it pickles by its importable functions)."""
    r = resolve(strategy)
    return r.spec


def _is_numba(fn) -> bool:
    try:
        from numba.core.dispatcher import Dispatcher
    except ImportError:  # pragma: no cover - numba is a dependency of the reference
        return False
    return isinstance(fn, Dispatcher)


class UserStrategy:
    """A strategy written in Python (:func:`define`). ``kind`` is ``numba`` (compiled to C
    callables, run by the library's threads without the GIL) or ``python`` (ctypes callbacks,
    one thread). Pickles by its name, parameter names, functions and state size, so a Dask
    worker rebuilds it from importable functions."""

    def __init__(self, name: str, param_names, init, step, state=1):
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"a strategy name is [a-z0-9_]+, got {name!r}")
        names = tuple(param_names)
        if not 1 <= len(names) <= MAX_PARAMS:
            raise ValueError(f"a strategy has 1 .. {MAX_PARAMS} parameters, got {len(names)}")
        for n in names:
            if not isinstance(n, str) or not _NAME.match(n):
                raise ValueError(f"a parameter name is [a-z0-9_]+, got {n!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"parameter names must be distinct, got {names}")
        self.state_dtype = None
        if isinstance(state, np.dtype) or (isinstance(state, type) and state is not bool and
                                           not issubclass(state, (int, np.integer))):
            dt = np.dtype(state)
            if dt.names is None or dt.itemsize < 1 or dt.hasobject:
                raise ValueError(f"a record state is a numpy structured dtype of numbers, got "
                                 f"{dt}")
            self.state_dtype = dt
            state = -(-dt.itemsize // 8)  # 8-byte slots
        elif isinstance(state, bool) or not isinstance(state, (int, np.integer)) or state < 1:
            raise ValueError(f"state is the number of float64 slots (>= 1) or a numpy "
                             f"structured dtype (a record), got {state!r}")
        if not callable(init) or not callable(step):
            raise TypeError("init and step must be functions")
        self.name, self.param_names, self.init, self.step = name, names, init, step
        self.n_state = int(state)
        numba = _is_numba(init), _is_numba(step)
        if numba[0] != numba[1]:
            raise TypeError("init and step must both be numba.njit functions, or both plain "
                            "Python functions")
        self.kind = "numba" if numba[0] else "python"
        self._resolved = None
        self._lock = threading.Lock()
        self.error = None  # python kind: the first exception a callback raised
        self.progress = None  # python kind: the running sweep's tf_progress, cancelled on error

    def __reduce__(self):
        return (_rebuild, (self.name, self.param_names, self.init, self.step,
                           self.n_state if self.state_dtype is None else self.state_dtype))

    def __repr__(self) -> str:
        return f"<UserStrategy {self.name} ({self.kind}): {', '.join(self.param_names)}>"

    def numba_parts(self):
        """(init, step, n_state) for :mod:`tollfree.reference_strategies` (float64 state);
        see :meth:`state_maker` for a record state."""
        if self.kind != "numba":
            raise TypeError(f"{self.name}: the numba reference needs numba.njit functions")
        return self.init, self.step, self.n_state

    def state_maker(self):
        """A record state's njit ``make() -> zeroed array of one record`` (None for float64
        slots)."""
        if self.state_dtype is None:
            return None
        mk = getattr(self, "_maker", None)
        if mk is None:
            from numba import njit
            dt = self.state_dtype

            @njit(cache=False)
            def make():
                return np.zeros(1, dtype=dt)
            mk = self._maker = make
        return mk

    def resolved(self) -> Resolved:
        """The ``tf_strategy_def`` (compiled on first use, kept as long as this object)."""
        with self._lock:
            if self._resolved is None:
                init, step, steps, (lanes, changes), keep = (
                    self._compile() if self.kind == "numba" else self._callbacks())
                raw = [n.encode() for n in self.param_names]
                names = (ctypes.c_char_p * len(raw))(*raw)
                name = self.name.encode()
                d = StrategyDef(ctypes.sizeof(StrategyDef), ABI, name, len(raw),
                                ctypes.cast(names, ctypes.POINTER(ctypes.c_char_p)),
                                (8 * self.n_state + 15) // 16 * 16, init, step, None, steps,
                                lanes, changes)
                buf = ctypes.create_string_buffer(_MSG)
                rc = L().tf_strategy_def_check(ctypes.addressof(d), buf, _MSG)
                if rc:
                    from tollfree.binding import KernelError
                    raise KernelError(rc, "strategy", buf.value.decode(errors="replace"))
                self._resolved = Resolved(ctypes.addressof(d), self.kind, self,
                                          (d, names, name, raw, keep))
            return self._resolved

    def _compile(self):
        """numba.cfunc wrappers: C callables with the ABI's signatures. The state is zeroed
        before init (as the reference does), so both start from the same bits."""
        from numba import carray, cfunc, types

        init_j, step_j, n_state, n_params = self.init, self.step, self.n_state, \
            len(self.param_names)
        f64p, i32p = types.CPointer(types.float64), types.CPointer(types.int32)
        hold, lanes = HOLD, LANES
        changes_sig = types.int32(types.voidptr, types.uintp, f64p, types.int64, i32p, i32p, i32p,
                                  types.CPointer(types.int64))
        if self.state_dtype is not None:
            dt, nbytes = self.state_dtype, self.state_dtype.itemsize

            @cfunc(types.int32(types.voidptr, f64p), nopython=True)
            def r_init(st, pp):
                b = carray(st, (nbytes,), dtype=np.uint8)
                for k in range(nbytes):
                    b[k] = 0
                return init_j(carray(st, (1,), dtype=dt)[0], carray(pp, (n_params,)))

            @cfunc(types.int32(types.voidptr, types.float64), nopython=True)
            def r_step(st, close):
                return step_j(carray(st, (1,), dtype=dt)[0], close)

            @cfunc(types.int32(types.voidptr, f64p, types.int64, i32p), nopython=True)
            def r_steps(st, cp, n, tp):
                s, c, t = carray(st, (1,), dtype=dt)[0], carray(cp, (n,)), carray(tp, (n,))
                for i in range(n):
                    t[i] = step_j(s, c[i])
                return 0

            # changes (strategy.h), one lane: the record's own loop, writing only the bars
            # where the position moves
            @cfunc(changes_sig, nopython=True)
            def r_changes(st, stride, cp, n, pp, bp, tp, kp):
                s, c = carray(st, (1,), dtype=dt)[0], carray(cp, (n,))
                b, t, p = carray(bp, (n,)), carray(tp, (n,)), carray(pp, (1,))
                pos, m = p[0], 0
                for i in range(n):
                    x = step_j(s, c[i])
                    if x != hold and x != pos:
                        b[m] = i
                        t[m] = x
                        m += 1
                        pos = x
                p[0] = pos
                carray(kp, (1,))[0] = m
                return 0

            return (INIT_FN(r_init.address), STEP_FN(r_step.address),
                    STEPS_FN(r_steps.address), (1, CHANGES_FN(r_changes.address)),
                    (r_init, r_step, r_steps, r_changes))

        @cfunc(types.int32(f64p, f64p), nopython=True)
        def c_init(st, pp):
            s = carray(st, (n_state,))
            for k in range(n_state):
                s[k] = 0.0
            return init_j(s, carray(pp, (n_params,)))

        @cfunc(types.int32(f64p, types.float64), nopython=True)
        def c_step(st, close):
            return step_j(carray(st, (n_state,)), close)

        # The sweep's batch member (strategy.h, steps): the same step in numba's own loop, where
        # it is inlined, one C call per block of bars instead of one a bar.
        @cfunc(types.int32(f64p, f64p, types.int64, i32p), nopython=True)
        def c_steps(st, cp, n, tp):
            s, c, t = carray(st, (n_state,)), carray(cp, (n,)), carray(tp, (n,))
            for i in range(n):
                t[i] = step_j(s, c[i])
            return 0

        # The sweep's sparse member (strategy.h, changes): LANES combos in one loop over the
        # bars, each step inlined, writing only the bars where a combo's position moves, so the
        # booking in C skips every other bar. What the loop adds to a step (a compare, a branch
        # almost never taken) hides behind the step itself, and the combos' steps overlap.
        @cfunc(changes_sig, nopython=True)
        def c_changes(st, stride, cp, n, pp, bp, tp, kp):
            s = carray(st, (lanes, stride // 8), dtype=np.float64)
            c = carray(cp, (n,))
            b, t = carray(bp, (lanes, n)), carray(tp, (lanes, n))
            p, m = carray(pp, (lanes,)), carray(kp, (lanes,))
            for k in range(lanes):
                m[k] = 0
            for i in range(n):
                ci = c[i]
                for k in range(lanes):
                    x = step_j(s[k, :n_state], ci)
                    if x != hold and x != p[k]:
                        b[k, m[k]] = i
                        t[k, m[k]] = x
                        m[k] += 1
                        p[k] = x
            return 0

        return (INIT_FN(c_init.address), STEP_FN(c_step.address), STEPS_FN(c_steps.address),
                (lanes, CHANGES_FN(c_changes.address)), (c_init, c_step, c_steps, c_changes))

    def _callbacks(self):
        """ctypes callbacks into the plain Python functions: each call takes the GIL. An
        exception is kept (``error``), init refuses and step says HOLD; the caller raises it
        after the run."""
        init_py, step_py, n_state, n_params = self.init, self.step, self.n_state, \
            len(self.param_names)
        views: dict[int, np.ndarray] = {}
        dt = self.state_dtype

        def view(st):
            s = views.get(st)
            if s is None:
                raw = np.ctypeslib.as_array(ctypes.cast(st, ctypes.POINTER(ctypes.c_double)),
                                            (n_state,))
                s = views[st] = raw if dt is None else \
                    raw.view(np.uint8)[:dt.itemsize].view(dt).view(np.recarray)[0]
            return s

        def py_init(st, pp):
            try:
                s = view(st)
                np.ctypeslib.as_array(ctypes.cast(st, ctypes.POINTER(ctypes.c_double)),
                                      (n_state,))[:] = 0.0
                return int(init_py(s, np.ctypeslib.as_array(pp, (n_params,)).copy()))
            except BaseException as e:  # noqa: BLE001 - kept and raised after the run
                self._failed(e)
                return 1

        def py_step(st, close):
            try:
                return int(step_py(view(st), close))
            except BaseException as e:  # noqa: BLE001
                self._failed(e)
                return HOLD

        init, step = INIT_FN(py_init), STEP_FN(py_step)
        # no steps, no changes: one call a bar
        return init, step, STEPS_FN(), (0, CHANGES_FN()), (py_init, py_step, views)

    def _failed(self, e: BaseException) -> None:
        """A callback raised: keep the first exception and stop the sweep (its progress is
        cancelled: it returns TF_E_CANCELLED at its next unit of work)."""
        self.error = self.error or e
        if self.progress is not None:
            lib().tf_progress_cancel(self.progress)

    def raise_error(self) -> None:
        """Raises (and clears) the exception a Python callback kept, if any (KeyboardInterrupt
        as itself)."""
        e, self.error = self.error, None
        if isinstance(e, KeyboardInterrupt):
            raise e
        if e is not None:
            raise RuntimeError(f"strategy {self.name}: a Python callback raised "
                               f"{type(e).__name__}: {e}") from e


_REBUILT: dict = {}


def _rebuild(name, param_names, init, step, state) -> UserStrategy:
    """Unpickling (a Dask worker): one UserStrategy, so one compilation, per process for the
    same functions (numba unpickles a dispatcher to the same object within a process).
    ``state``: the slot count or the record dtype."""
    key = (name, tuple(param_names), id(init), id(step), state)
    with _LOCK:
        u = _REBUILT.get(key)
        if u is None:
            u = _REBUILT[key] = UserStrategy(name, param_names, init, step, state)
            u._fns = (init, step)  # keeps the ids of the key alive
        return u


def define(name: str, param_names, init, step, state=1) -> UserStrategy:
    """A strategy from two functions (module docstring): ``init(state, params) -> int`` and
    ``step(state, close) -> int``, ``state`` a float64 array of ``state`` slots (an int), or one
    record of a numpy structured dtype (``state=np.dtype([("n", np.int64), ...])``: the
    functions then get a numba record, fields by name), zeroed before init; ``params`` a
    float64 array in the order of ``param_names``. With ``numba.njit``
    functions the library runs it from its own threads without the GIL; plain Python functions
    run on a slow path (one thread, a ``UserWarning`` when it runs)."""
    return UserStrategy(name, param_names, init, step, state)


def slow_path_note(r: Resolved, threads) -> int | None:
    """For a plain-Python strategy: warns that it runs on the slow path and returns 1 (the
    thread count it runs with); None for any other strategy."""
    if r.kind != "python":
        return None
    warnings.warn(f"tollfree: strategy {r.name} is plain Python: it runs through ctypes "
                  "callbacks on one thread, holding the GIL (decorate init and step with "
                  "numba.njit for C speed)", UserWarning, stacklevel=4)
    return 1


def after_run(r: Resolved) -> None:
    """Raises what a plain-Python strategy's callback raised during the run."""
    if r.kind == "python":
        r.spec.raise_error()
