"""Dataset caches (docs/protocol.md "Dataset caches"): with no cache, a partial one and a full
one, repeated SWEEP_DS calls and one RUN_ONE per combo give the in-process bits."""
import numpy as np
import pytest

import tollfree
from conftest import DEADLINE  # noqa: E402


@pytest.mark.parametrize("cache", ["0", "8M", "256M"])
def test_cached_dataset_sweeps_are_bit_identical(server_factory, default_case, cache):
    close, params, pnl, trades = default_case
    srv = server_factory(tcp=False, shm=False, extra=("--dataset-cache", cache))
    with tollfree.connect(srv.url("unix"), timeout=DEADLINE) as c:
        ds = c.load(close)
        for _ in range(2):
            p, t = c.sweep(ds, params)
            assert np.array_equal(p.view(np.int64), pnl.view(np.int64))
            assert np.array_equal(t, trades)
        for j in range(params.shape[0]):
            p, t = c.run_one(ds, params[j])
            assert np.float64(p).view(np.int64) == pnl[j].view(np.int64) and t == trades[j]
        c.drop(ds)


def test_cache_flag_is_checked(server_factory, tmp_path):
    import subprocess

    from tollfree._lib import bin_path

    r = subprocess.run([bin_path(), "serve", "--unix", str(tmp_path / "x.sock"),
                        "--dataset-cache", "lots"], capture_output=True, text=True,
                       timeout=DEADLINE)
    assert r.returncode == 2 and "--dataset-cache" in r.stderr
