"""blas_threads: one OpenBLAS thread for a command's process unless the user chose a number."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sst_cdma.tools.cli.blas_threads import THREAD_VARIABLES, one_blas_thread


def test_one_thread_is_set_where_nothing_is_chosen_and_numpy_is_not_loaded(monkeypatch):
    monkeypatch.delitem(sys.modules, "numpy", raising=False)
    env: dict[str, str] = {"PATH": "/bin"}
    assert one_blas_thread(env) is True
    assert env == {"PATH": "/bin", "OPENBLAS_NUM_THREADS": "1"}


@pytest.mark.parametrize("name", THREAD_VARIABLES)
def test_a_number_the_user_chose_is_kept(monkeypatch, name):
    monkeypatch.delitem(sys.modules, "numpy", raising=False)
    env = {name: "3"}
    assert one_blas_thread(env) is False
    assert env == {name: "3"}


def test_nothing_is_set_once_numpy_is_loaded():
    import numpy  # noqa: F401  (OpenBLAS has read its variables by now)

    env: dict[str, str] = {}
    assert one_blas_thread(env) is False
    assert env == {}


def _openblas_threads(extra_env: dict[str, str]) -> list[int]:
    """The thread counts of the OpenBLAS pools in a fresh process that loads ``sst``'s entry
    point, as threadpoolctl reports them."""
    pytest.importorskip("threadpoolctl")
    code = ("import sst_cdma.tools.cli.sst_main, threadpoolctl; "
            "print(*[p['num_threads'] for p in threadpoolctl.threadpool_info() "
            "if p['internal_api'] == 'openblas'])")
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES} | extra_env
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout.split()
    if not out:
        pytest.skip("this NumPy does not load OpenBLAS")
    return [int(n) for n in out]


def test_the_sst_entry_point_loads_numpy_with_one_blas_thread():
    assert _openblas_threads({}) == [1]


def test_the_sst_entry_point_keeps_the_users_thread_count():
    assert _openblas_threads({"OPENBLAS_NUM_THREADS": "2"}) == [2]
