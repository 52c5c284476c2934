"""Fixtures for the codec tests (helpers live in ``codec_helpers``)."""
from __future__ import annotations

import pytest


@pytest.fixture(params=["simd", "scalar"])
def kernel_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with the SIMD kernels allowed (where the host has them) and disabled."""
    if request.param == "scalar":
        monkeypatch.setenv("SST_CDMA_CODECS_SIMD", "0")
    else:
        monkeypatch.delenv("SST_CDMA_CODECS_SIMD", raising=False)
    return request.param
