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
    "tollfree.paper._EngineConfig": "tf_engine_config",
    "tollfree.paper._Sink": "tf_engine_sink",
    "tollfree.paper._JournalOpts": "tf_journal_opts",
}
# Sizes Python uses as plain constants: "module.NAME": the C struct.
SIZES = {"tollfree.paper.MSG_SIZE": "tf_ofl_msg"}


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
