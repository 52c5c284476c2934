"""Allocation of compressed-stream output: a ``bytes`` object written in place.

:func:`~sst_cdma.codecs.compress` must return ``bytes``.  Building the stream in a numpy array
and calling ``tobytes()`` costs a full copy plus first-touch page faults on the new object,
which for large streams is as expensive as ZVC itself.  On CPython, large outputs are therefore
written directly into a freshly created ``bytes`` object through a writable numpy view of its
storage, the same pattern as C code filling ``PyBytes_FromStringAndSize(NULL, n)`` before
publishing it: the object is new, referenced only here, unhashed, and handed out only after
writing has finished.  On Linux the storage is also advised to use transparent huge pages.
Elsewhere (or if the self-check at import fails) a numpy buffer plus ``tobytes()`` is used.
"""
from __future__ import annotations

import ctypes
import sys

import numpy as np

__all__ = ["OutputBuffer", "IN_PLACE_MIN_BYTES", "in_place_supported"]

IN_PLACE_MIN_BYTES = 1 << 20
"""Outputs at least this large are written in place into the ``bytes`` object."""

_HUGEPAGE_MIN_BYTES = 4 << 20
_MADV_HUGEPAGE = 14
_PAGE = 4096


def _bytes_address(obj: bytes) -> int:
    # c_char_p built from a bytes object points at the object's own storage (no copy).
    addr = ctypes.cast(ctypes.c_char_p(obj), ctypes.c_void_p).value
    if addr is None:
        raise RuntimeError("no storage address")
    return addr


def _writable_view(obj: bytes) -> np.ndarray:
    raw = (ctypes.c_char * len(obj)).from_address(_bytes_address(obj))
    raw._owner = obj  # type: ignore[attr-defined]  # the view keeps the bytes object alive
    return np.frombuffer(raw, dtype=np.uint8)  # type: ignore[call-overload]


def _load_madvise():  # type: ignore[no-untyped-def]
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


_madvise = _load_madvise()


def _self_check() -> bool:
    if sys.implementation.name != "cpython":
        return False
    try:
        obj = bytes(64)
        view = _writable_view(obj)
        view[:] = np.arange(64, dtype=np.uint8)
        return obj == bytes(range(64))
    except Exception:  # noqa: BLE001 - any failure selects the portable path
        return False


_IN_PLACE = _self_check()


def in_place_supported() -> bool:
    """Whether large outputs are written directly into the returned ``bytes`` object."""
    return _IN_PLACE


class OutputBuffer:
    """A ``nbytes`` output stream: fill :attr:`view`, then call :meth:`finish` once."""

    def __init__(self, nbytes: int) -> None:
        self._obj: bytes | None = None
        if _IN_PLACE and nbytes >= IN_PLACE_MIN_BYTES:
            self._obj = bytes(nbytes)  # calloc'd: untouched pages cost nothing yet
            self.view: np.ndarray = _writable_view(self._obj)
            if _madvise is not None and nbytes >= _HUGEPAGE_MIN_BYTES:
                start = self.view.ctypes.data
                lo = (start + _PAGE - 1) & ~(_PAGE - 1)
                hi = (start + nbytes) & ~(_PAGE - 1)
                if hi > lo:
                    _madvise(lo, hi - lo, _MADV_HUGEPAGE)  # advisory; failure is harmless
        else:
            self.view = np.empty(nbytes, dtype=np.uint8)

    def finish(self) -> bytes:
        """Return the finished stream as ``bytes``; the buffer must not be used afterwards."""
        view = self.view
        del self.view
        if self._obj is not None:
            obj, self._obj = self._obj, None
            return obj
        return view.tobytes()
