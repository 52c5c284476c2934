"""Exception raised when a byte stream cannot be decoded."""
from __future__ import annotations

__all__ = ["CodecError"]


class CodecError(ValueError):
    """A compressed stream is corrupt, truncated, inconsistent or not a codec stream at all.

    Raised by :func:`sst_cdma.codecs.decompress` (and :func:`~sst_cdma.codecs.stream_info`)
    instead of crashing, hanging or allocating memory sized by an unvalidated header.
    Subclasses :class:`ValueError` so callers that treat bad input generically still catch it.
    """
