"""A batch's body as sent: its content coding undone, within the size limit.

A gzip bomb costs at most the limit of memory: decompression stops one byte past it.
"""

from __future__ import annotations

from typing import cast

try:  # zlib-ng inflates a batch ~2x faster than the system zlib, with the same API
    from zlib_ng import zlib_ng as zlib
except ImportError:  # pragma: no cover - a platform without a zlib-ng wheel
    import zlib  # type: ignore[no-redef]

from collector.backend import IngestError, RejectReason

#: zlib's error class (zlib-ng's stub types it as an instance)
_ZlibError = cast(type[Exception], zlib.error)


def decompress(body: bytes, content_encoding: str | None, max_bytes: int) -> bytes:
    """The body without its content coding, refused (413) past ``max_bytes`` decompressed.

    Decompression stops one byte past the limit, so a gzip bomb costs at most
    ``max_bytes`` of memory.
    """
    coding = (content_encoding or "identity").strip().lower()
    if coding in ("gzip", "x-gzip"):
        data = _gunzip(body, max_bytes)
    elif coding == "identity":
        data = body
    else:
        raise IngestError(
            415,
            f"Content-Encoding {coding!r} is not supported (use gzip or identity)",
            reason=RejectReason.UNSUPPORTED_MEDIA_TYPE,
        )
    if len(data) > max_bytes:
        raise too_large(max_bytes)
    return data


def _gunzip(body: bytes, max_bytes: int) -> bytes:
    try:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        data = inflater.decompress(body, max_bytes + 1)
        if inflater.eof and not inflater.unused_data and len(data) <= max_bytes:
            return data  # the usual body: one gzip member, returned without a copy
    except _ZlibError as err:
        raise IngestError(422, f"gzip body is corrupt: {err}") from err
    out = bytearray()
    rest = body
    try:
        while rest:  # one gzip member per round; concatenated members are valid gzip
            inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            out += inflater.decompress(rest, max_bytes + 1 - len(out))
            if len(out) > max_bytes or inflater.unconsumed_tail:
                raise too_large(max_bytes)
            if not inflater.eof:
                raise IngestError(422, "gzip body is truncated")
            rest = inflater.unused_data
    except _ZlibError as err:
        raise IngestError(422, f"gzip body is corrupt: {err}") from err
    return bytes(out)


def too_large(max_bytes: int, decompressed: bool = True) -> IngestError:
    """The 413 for a body past ``max_bytes``, as sent or once decompressed."""
    size = "decompressed" if decompressed else "as sent"
    return IngestError(
        413,
        f"batch is larger than {max_bytes} bytes ({size}); send smaller batches",
        reason=RejectReason.TOO_LARGE,
    )
