"""Reader and writer for the IDX format of the MNIST family (plain or gzip-compressed).

Format (http://yann.lecun.com/exdb/mnist/, "THE IDX FILE FORMAT"): two zero bytes, one dtype byte,
one byte with the number of dimensions ``d``, then ``d`` big-endian uint32 sizes, then the data in
C order, big-endian.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from pathlib import Path

import numpy as np

# dtype byte -> big-endian numpy dtype
IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_GZIP_MAGIC = b"\x1f\x8b"


class IDXFormatError(ValueError):
    """The file is not a well-formed IDX file (bad magic, unknown dtype, truncated, trailing bytes)."""


def _read_bytes(path: Path) -> bytes:
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == _GZIP_MAGIC:
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise IDXFormatError(f"{path}: corrupt or truncated gzip stream ({e})") from e
    return raw


def parse_idx(buf: bytes, where: str = "IDX data") -> np.ndarray:
    """Parse the bytes of an uncompressed IDX file into a numpy array in native byte order.

    Args:
        buf: the whole file's bytes (header then data).
        where: what the bytes are (a path or a source), for error messages.

    Returns:
        array of the stored shape ``[d_1, ..., d_k]`` and dtype (uint8, int8, int16, int32, float32,
        float64).

    Raises:
        IDXFormatError: bad magic number, unknown dtype code, a header or payload shorter than the
            header announces, or bytes after the payload.
    """
    if len(buf) < 4:
        raise IDXFormatError(f"{where}: truncated header ({len(buf)} bytes, need at least 4)")
    zero, code, ndim = struct.unpack(">HBB", buf[:4])
    if zero != 0:
        raise IDXFormatError(f"{where}: bad magic number 0x{buf[:4].hex()} (must start with two zero bytes)")
    if code not in IDX_DTYPES:
        known = ", ".join(f"0x{c:02X}" for c in IDX_DTYPES)
        raise IDXFormatError(f"{where}: unknown IDX dtype code 0x{code:02X}; known: {known}")
    header = 4 + 4 * ndim
    if len(buf) < header:
        raise IDXFormatError(
            f"{where}: truncated header: {ndim} dimensions need {header} bytes, got {len(buf)}"
        )
    shape = struct.unpack(f">{ndim}I", buf[4:header])
    dtype = IDX_DTYPES[code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    got = len(buf) - header
    if got < expected:
        raise IDXFormatError(f"{where}: truncated data: shape {shape} needs {expected} bytes, got {got}")
    if got > expected:
        raise IDXFormatError(f"{where}: {got - expected} unexpected bytes after the data of shape {shape}")
    data = np.frombuffer(buf, dtype=dtype, count=expected // dtype.itemsize, offset=header)
    return data.reshape(shape).astype(dtype.newbyteorder("="))


def read_idx_bytes(path: str | os.PathLike) -> bytes:
    """The uncompressed IDX bytes of a file, plain or gzip-compressed (detected by its first two bytes).

    Raises:
        IDXFormatError: a corrupt or truncated gzip stream.
        OSError: the file cannot be read.
    """
    return _read_bytes(Path(path))


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file into a numpy array in native byte order.

    The file may be gzip-compressed (detected by its first two bytes, not by its name).

    Args:
        path: the ``.idx`` / ``-ubyte`` file, plain or ``.gz``.

    Returns:
        see :func:`parse_idx`.

    Raises:
        IDXFormatError: see :func:`parse_idx`; also a corrupt gzip stream.
    """
    return parse_idx(read_idx_bytes(path), str(path))


def idx_bytes(array: np.ndarray) -> bytes:
    """The uncompressed IDX bytes (header, then the big-endian data in C order) of ``array``.

    Raises:
        ValueError: a dtype IDX cannot hold, or more than 255 dimensions.
    """
    array = np.asarray(array)
    codes = {dt.newbyteorder("="): c for c, dt in IDX_DTYPES.items()}
    native = array.dtype.newbyteorder("=")
    if native not in codes:
        raise ValueError(f"IDX cannot store dtype {array.dtype}")
    if array.ndim > 255:
        raise ValueError("IDX stores at most 255 dimensions")
    header = struct.pack(">HBB", 0, codes[native], array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + np.ascontiguousarray(array, dtype=IDX_DTYPES[codes[native]]).tobytes()


def write_idx(path: str | os.PathLike, array: np.ndarray) -> None:
    """Write ``array`` as an IDX file (:func:`idx_bytes`); gzip-compressed when ``path`` ends in ``.gz``.

    Raises:
        ValueError: a dtype IDX cannot hold, or more than 255 dimensions.
    """
    payload = idx_bytes(array)
    path = Path(path)
    if path.suffix == ".gz":
        payload = gzip.compress(payload, mtime=0)
    path.write_bytes(payload)
