"""The IDX parser on files written byte by byte here (plain and gzip, every dtype, several ndims)."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from hetfl.data.idx import IDXFormatError, read_idx, write_idx

# code byte, big-endian struct format, numpy dtype
DTYPES = [
    (0x08, "B", np.uint8),
    (0x09, "b", np.int8),
    (0x0B, "h", np.int16),
    (0x0C, "i", np.int32),
    (0x0D, "f", np.float32),
    (0x0E, "d", np.float64),
]


def idx_bytes(code: int, fmt: str, shape: tuple[int, ...], values: list) -> bytes:
    """An IDX file built with struct only (independent of the module under test)."""
    header = bytes([0, 0, code, len(shape)]) + b"".join(struct.pack(">I", s) for s in shape)
    return header + struct.pack(f">{len(values)}{fmt}", *values)


def sample_values(fmt: str, n: int) -> list:
    if fmt == "B":
        return [(7 * i + 3) % 256 for i in range(n)]
    if fmt in "bhi":
        return [(-1) ** i * (5 * i + 1) for i in range(n)]
    return [(-1) ** i * (i + 0.25) * 1.5 for i in range(n)]


@pytest.mark.parametrize("code,fmt,dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (2, 1, 3, 2)])
@pytest.mark.parametrize("compressed", [False, True])
def test_read_idx_every_dtype_and_ndim(tmp_path, code, fmt, dtype, shape, compressed):
    values = sample_values(fmt, int(np.prod(shape)))
    raw = idx_bytes(code, fmt, shape, values)
    path = tmp_path / ("a.idx.gz" if compressed else "a.idx")
    path.write_bytes(gzip.compress(raw) if compressed else raw)
    arr = read_idx(path)
    assert arr.shape == shape
    assert arr.dtype == np.dtype(dtype)
    assert arr.dtype.isnative
    np.testing.assert_array_equal(arr.reshape(-1), np.array(values, dtype=dtype))


def test_gzip_is_detected_by_content_not_name(tmp_path):
    raw = idx_bytes(0x08, "B", (2, 2), [1, 2, 3, 4])
    path = tmp_path / "looks-plain.idx"
    path.write_bytes(gzip.compress(raw))
    np.testing.assert_array_equal(read_idx(path), [[1, 2], [3, 4]])


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("name", ["r.idx", "r.idx.gz"])
def test_write_read_roundtrip(tmp_path, dtype, name):
    arr = (np.arange(24).reshape(2, 3, 4) - 5).astype(dtype)
    write_idx(tmp_path / name, arr)
    out = read_idx(tmp_path / name)
    assert out.dtype == arr.dtype
    np.testing.assert_array_equal(out, arr)
    raw = (tmp_path / name).read_bytes()
    header = gzip.decompress(raw)[:4] if name.endswith(".gz") else raw[:4]
    code = {np.uint8: 8, np.int8: 9, np.int16: 11, np.int32: 12, np.float32: 13, np.float64: 14}[dtype]
    assert header == bytes([0, 0, code, 3])


def test_write_rejects_unstorable_dtype(tmp_path):
    with pytest.raises(ValueError, match="cannot store"):
        write_idx(tmp_path / "x.idx", np.zeros(3, dtype=np.int64))


@pytest.mark.parametrize(
    "raw,match",
    [
        (b"\x00\x01\x08\x01" + struct.pack(">I", 1) + b"\x05", "bad magic"),
        (b"\x00\x00\x07\x01" + struct.pack(">I", 1) + b"\x05", "unknown IDX dtype code 0x07"),
        (b"\x00\x00", "truncated header"),
        (b"\x00\x00\x08\x03" + struct.pack(">I", 2), "truncated header"),
        (b"\x00\x00\x08\x02" + struct.pack(">II", 2, 3) + b"\x00" * 5, "truncated data"),
        (b"\x00\x00\x0c\x01" + struct.pack(">I", 2) + b"\x00" * 7, "truncated data"),
        (b"\x00\x00\x08\x01" + struct.pack(">I", 2) + b"\x00" * 3, "unexpected bytes"),
    ],
)
@pytest.mark.parametrize("compressed", [False, True])
def test_malformed_files_raise(tmp_path, raw, match, compressed):
    path = tmp_path / "bad.idx"
    path.write_bytes(gzip.compress(raw) if compressed else raw)
    with pytest.raises(IDXFormatError, match=match) as info:
        read_idx(path)
    assert str(path) in str(info.value)


def test_truncated_gzip_raises(tmp_path):
    data = gzip.compress(idx_bytes(0x08, "B", (100,), list(range(100))))
    path = tmp_path / "cut.idx.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(IDXFormatError, match="gzip"):
        read_idx(path)
