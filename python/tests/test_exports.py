"""libtollfree.so exports exactly the public API: every dynamic symbol it defines is a function
or object declared TF_API in include/tollfree/, and every such declaration is exported. Internal
symbols keep their module's own prefix (srv_, eng_, tfn_, tfc_, tfo_, ...) and hidden visibility,
so nothing internal leaks out under the public tf_ name."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tollfree._lib import lib_path

INC = Path(__file__).resolve().parents[2] / "include" / "tollfree"


def _declared() -> set[str]:
    names = set()
    for h in INC.glob("*.h"):
        if h.name == "api.h":  # defines TF_API itself
            continue
        text = re.sub(r"/\*.*?\*/", "", h.read_text(), flags=re.S)
        for decl in re.findall(r"\bTF_API\b([^;{]*)", text):
            m = re.search(r"(\w+)\s*\(", decl)
            if m:
                names.add(m.group(1))
    return names


def _exported() -> set[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", lib_path()], check=True,
                         capture_output=True, text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if len(line.split()) == 3}


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs nm (binutils)")
def test_exports_are_the_public_api():
    declared, exported = _declared(), _exported()
    assert len(declared) > 100  # the parse found the API
    leaked = sorted(exported - declared)
    assert not leaked, f"exported but not declared TF_API in include/tollfree: {leaked}"
    missing = sorted(declared - exported)
    assert not missing, f"declared TF_API but not exported: {missing}"
    assert all(n.startswith("tf_") for n in exported), sorted(
        n for n in exported if not n.startswith("tf_"))


INTERNAL = ("tfk_", "tfw_", "tfo_", "eng_", "tfes_", "tfn_", "srv_", "tfc_", "tfu_", "tfr_", "tfp_", "tfs_",
            "tfv_")


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs nm (binutils)")
def test_internal_symbols_have_their_own_prefix():
    """Every global symbol of the library's objects (the static archive built beside the shared
    library) is public (declared TF_API) or carries a part's own prefix (README, "Names"): no
    internal function takes the public tf_ name, hidden or not."""
    archive = Path(lib_path()).resolve().parent / "libtollfree_static.a"
    if not archive.exists():
        pytest.skip(f"no {archive.name} beside {lib_path()} (an installed library)")
    out = subprocess.run(["nm", "--defined-only", str(archive)], check=True,
                         capture_output=True, text=True).stdout
    names = {p[2] for p in (line.split() for line in out.splitlines())
             if len(p) == 3 and p[1] in "TDBR"}
    assert len(names) > 200  # the parse found the library
    declared = _declared()
    stray = sorted(n for n in names - declared if not n.startswith(INTERNAL))
    assert not stray, f"global symbols neither public nor internally prefixed: {stray}"
