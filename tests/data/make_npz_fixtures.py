#!/usr/bin/env python3
"""Writes the .npy/.npz fixtures that tests/runtime/npz_test.cc reads, using numpy's own writer.

Every array is a closed formula of its flat index i, so the C++ test computes the expected values
itself instead of trusting this script's output:

    f4     float32 [3,4]      0.5 * i - 1
    f8     float64 [2,3]      i / 3
    f2     float16 [8]        0.25 * (i - 4)
    i8     int64   [5]        (i - 2) * 10**12
    i4     int32   [2,3]      1000 * (i - 3)
    i1     int8    [2,5]      i - 5
    u1     uint8   [6]        250 + i
    b1     bool    [7]        i % 3 == 0
    scalar float32 []         3.5
    empty  float32 [0,3]
    empty3 int64   [2,0,4]
    nd     float32 [2,3,4,5]  i

Files (run from anywhere: `/usr/bin/python3 tests/data/make_npz_fixtures.py`):

    stored.npz      np.savez (method 0; numpy adds zip64 extra fields to the local headers)
    deflated.npz    np.savez_compressed (method 8)
    streamed.npz    zipfile on an unseekable stream: data descriptors (flag bit 3), entries
                    alternately stored and deflated, sizes zero in the local headers
    zip64.npz       hand-built: sizes and offsets saturated at 0xffffffff in the central
                    directory with zip64 extra fields, zip64 end record and locator
    v1.npy v2.npy v3.npy   the f4 array with .npy format versions 1.0, 2.0, 3.0
    fortran.npy     a Fortran-ordered [2,3] array (otter refuses it)
    uint16.npy      an unsupported dtype
    bigendian.npy   '>f4'
"""

import io
import os
import struct
import zipfile
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def fixture_arrays():
    def idx(n):
        return np.arange(n, dtype=np.int64)

    return {
        "f4": (0.5 * idx(12) - 1).astype(np.float32).reshape(3, 4),
        "f8": (idx(6) / 3).reshape(2, 3),
        "f2": (0.25 * (idx(8) - 4)).astype(np.float16),
        "i8": (idx(5) - 2) * 10**12,
        "i4": (1000 * (idx(6) - 3)).astype(np.int32).reshape(2, 3),
        "i1": (idx(10) - 5).astype(np.int8).reshape(2, 5),
        "u1": (250 + idx(6)).astype(np.uint8),
        "b1": idx(7) % 3 == 0,
        "scalar": np.array(3.5, dtype=np.float32),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "empty3": np.zeros((2, 0, 4), dtype=np.int64),
        "nd": idx(120).astype(np.float32).reshape(2, 3, 4, 5),
    }


def npy_bytes(array, version=None):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, version=version, allow_pickle=False)
    return buf.getvalue()


class Unseekable:
    """A write-only stream without tell/seek, which makes zipfile write data descriptors."""

    def __init__(self):
        self.buf = io.BytesIO()

    def write(self, data):
        return self.buf.write(data)

    def flush(self):
        pass


def write_streamed(path, arrays):
    stream = Unseekable()
    with zipfile.ZipFile(stream, "w") as zf:
        for k, (name, array) in enumerate(arrays.items()):
            method = zipfile.ZIP_DEFLATED if k % 2 else zipfile.ZIP_STORED
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            with zf.open(info, "w", force_zip64=True) as f:
                f.write(npy_bytes(array))
    data = stream.buf.getvalue()
    with open(path, "wb") as f:
        f.write(data)


def write_zip64(path, arrays):
    """A zip whose central directory records every size and offset in zip64 extra fields."""
    out = bytearray()
    central = bytearray()
    for k, (name, array) in enumerate(arrays.items()):
        payload = npy_bytes(array)
        deflate = k % 2 == 1
        if deflate:
            c = zlib.compressobj(6, zlib.DEFLATED, -15)
            stored = c.compress(payload) + c.flush()
        else:
            stored = payload
        method = 8 if deflate else 0
        crc = zlib.crc32(payload)
        fname = (name + ".npy").encode()
        offset = len(out)
        local_extra = struct.pack("<HHQQ", 1, 16, len(payload), len(stored))
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, method, 0, 0x21, crc,
                           0xFFFFFFFF, 0xFFFFFFFF, len(fname), len(local_extra))
        out += fname + local_extra + stored
        extra = struct.pack("<HHQQQ", 1, 24, len(payload), len(stored), offset)
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, method, 0, 0x21, crc,
                               0xFFFFFFFF, 0xFFFFFFFF, len(fname), len(extra), 0, 0, 0, 0,
                               0xFFFFFFFF)
        central += fname + extra
    cd_offset = len(out)
    out += central
    z64_offset = len(out)
    count = len(arrays)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, len(central),
                       cd_offset)
    out += struct.pack("<IIQI", 0x07064B50, 0, z64_offset, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    with open(path, "wb") as f:
        f.write(out)


def check_readable(path, arrays):
    """The fixture must read back with numpy (an independent zip and .npy reader)."""
    with np.load(path) as z:
        assert list(z.keys()) == list(arrays), (path, list(z.keys()))
        for name, array in arrays.items():
            got = z[name]
            assert got.dtype == array.dtype and got.shape == array.shape, (path, name)
            assert np.array_equal(got, array), (path, name)


def main():
    arrays = fixture_arrays()
    out = lambda name: os.path.join(HERE, name)

    np.savez(out("stored.npz"), **arrays)
    np.savez_compressed(out("deflated.npz"), **arrays)
    write_streamed(out("streamed.npz"), arrays)
    write_zip64(out("zip64.npz"), arrays)
    for name in ["stored.npz", "deflated.npz", "streamed.npz", "zip64.npz"]:
        check_readable(out(name), arrays)
    with zipfile.ZipFile(out("streamed.npz")) as zf:
        assert all(info.flag_bits & 0x8 for info in zf.infolist())

    for major in (1, 2, 3):
        with open(out(f"v{major}.npy"), "wb") as f:
            f.write(npy_bytes(arrays["f4"], version=(major, 0)))
        assert np.array_equal(np.load(out(f"v{major}.npy")), arrays["f4"])
    np.save(out("fortran.npy"), np.asfortranarray(arrays["f8"]))
    np.save(out("uint16.npy"), np.arange(4, dtype=np.uint16))
    np.save(out("bigendian.npy"), np.arange(4, dtype=">f4"))
    print("wrote fixtures to", HERE)


if __name__ == "__main__":
    main()
