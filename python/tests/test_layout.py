"""Every ctypes mirror of a public C struct has the C layout: size, field names, offsets, sizes.

The layout comes from the C compiler itself (``tests/layout_print``, built from
tests/unit/layout_print.c next to the ``tollfree`` binary), so a field added or moved in a header
fails here until the Python mirror follows. A new mirror is one row of MIRRORS; a module-level
``ctypes.Structure`` in the package that is not listed fails test_every_mirror_is_listed.
"""
from __future__ import annotations

import ast
import ctypes
import importlib
import os
import subprocess
from pathlib import Path

import pytest

from tollfree._lib import bin_path

PKG = Path(__file__).resolve().parents[1] / "tollfree"

# "module.Class": the C struct it mirrors. Every field of the mirror must be a C field of the same
# name, offset and size, and the mirror must cover the whole struct.
MIRRORS = {
    "tollfree.binding._Opts": "tf_sweep_opts",
    "tollfree.binding._Stats": "tf_stats",
    "tollfree.binding._Progress": "tf_progress",
    "tollfree.paper._Config": "tf_paper_config",
    "tollfree.paper._Result": "tf_paper_result",
    "tollfree.data._PricesOpts": "tf_prices_opts",
    "tollfree._research.Results": "tf_results",
    "tollfree._research.Fold": "tf_fold",
    "tollfree._research.OosOpts": "tf_oos_opts",
    "tollfree._research.GridReport": "tf_grid_report",
    "tollfree.strategies.StrategyDef": "tf_strategy_def",
    "tollfree.stats._TimeOpts": "tf_time_opts",
}
# numpy dtypes that mirror a C struct (arrays the library fills): "module.NAME": the C struct.
# The itemsize must be the struct's size and each field's offset and size the C field's (a
# nested C struct, tf_oos_row's fold, is listed by its own fields).
DTYPES = {
    "tollfree._research.DERIVED_DTYPE": "tf_derived",
    "tollfree._research.OOS_ROW_DTYPE": "tf_oos_row",
    "tollfree._research.TRADE_DTYPE": "tf_trade",
    "tollfree.binding.STATS_DTYPE": "tf_stats",
    "tollfree.stats.TIME_DTYPE": "tf_time_stats",
}
# Sizes Python uses as plain constants: "module.NAME": the C struct.
SIZES = {"tollfree.paper.FILL_SIZE": "tf_paper_fill"}


def _layout_program() -> str:
    env = os.environ.get("TOLLFREE_LAYOUT")
    return env or str(Path(bin_path()).resolve().parent / "tests" / "layout_print")


@pytest.fixture(scope="module")
def layout():
    prog = _layout_program()
    assert os.path.exists(prog), f"{prog} not found: build the tree (or set TOLLFREE_LAYOUT)"
    out = subprocess.run([prog], check=True, capture_output=True, text=True).stdout
    structs, fields = {}, {}
    for line in out.splitlines():
        word, name, *nums = line.split()
        if word == "struct":
            structs[name] = int(nums[0])
        else:
            fields[name] = (int(nums[0]), int(nums[1]))
    return structs, fields


def _resolve(dotted: str):
    mod, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(mod), name)


@pytest.mark.parametrize("mirror", sorted(MIRRORS))
def test_mirror_matches_c(layout, mirror):
    structs, fields = layout
    c_name = MIRRORS[mirror]
    cls = _resolve(mirror)
    assert c_name in structs, f"tests/unit/layout_print.c does not print {c_name}"
    py = {name: (getattr(cls, name).offset, getattr(cls, name).size) for name, *_ in cls._fields_}
    c = {k.split(".", 1)[1]: v for k, v in fields.items() if k.startswith(c_name + ".")}
    for name, (off, size) in py.items():
        assert name in c, f"{mirror}.{name}: {c_name} has no field {name} (C fields: {sorted(c)})"
        assert (off, size) == c[name], (
            f"{mirror}.{name}: Python offset {off} size {size}, C offset {c[name][0]} "
            f"size {c[name][1]}")
    missing = sorted(set(c) - set(py))
    assert not missing, f"{mirror} lacks the C fields {missing} of {c_name}"
    assert ctypes.sizeof(cls) == structs[c_name], (
        f"sizeof {mirror} is {ctypes.sizeof(cls)}, sizeof({c_name}) is {structs[c_name]}")


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_dtype_matches_c(layout, name):
    structs, fields = layout
    c_name = DTYPES[name]
    dt = _resolve(name)
    assert dt.itemsize == structs[c_name], f"{name}.itemsize {dt.itemsize} != sizeof({c_name})"
    c = {k.split(".", 1)[1]: v for k, v in fields.items() if k.startswith(c_name + ".")}
    nested = {k: v for k, v in c.items() if k not in dt.names}  # e.g. tf_oos_row.fold
    for f in dt.names:
        off, size = dt.fields[f][1], dt.fields[f][0].itemsize
        if f in c:
            assert (off, size) == c[f], f"{name}.{f}: ({off}, {size}) != C {c[f]}"
        else:  # a field of a nested struct: inside one of the C fields left over
            assert any(o <= off and off + size <= o + sz for o, sz in nested.values()), (
                f"{name}.{f} is not a field of {c_name}")


@pytest.mark.parametrize("const", sorted(SIZES))
def test_size_constants_match_c(layout, const):
    structs, _ = layout
    assert _resolve(const) == structs[SIZES[const]], f"{const} != sizeof({SIZES[const]})"


def test_every_mirror_is_listed():
    """A ctypes.Structure declared at module level anywhere in the package is a C mirror and must
    be checked above (one declaration per C struct: other modules import it)."""
    found = []
    for path in sorted(PKG.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        mod = "tollfree." + ".".join(path.relative_to(PKG).with_suffix("").parts)
        mod = mod.removesuffix(".__init__")
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(
                    ast.unparse(b) in ("ctypes.Structure", "Structure") for b in node.bases):
                found.append(f"{mod}.{node.name}")
    unlisted = sorted(set(found) - set(MIRRORS))
    assert not unlisted, f"ctypes mirrors not checked against C: {unlisted}"
    assert set(MIRRORS) <= set(found)
