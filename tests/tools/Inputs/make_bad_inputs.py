#!/usr/bin/env python3
"""Writes hostile or damaged inputs into OUT_DIR for tests/tools/limits.test and
tests/tools/data-faults.test: models that declare huge or overflowing tensors or point their
external data outside their folder, .npz zip bombs, and digits data sets with NaN, Inf, bad labels
or no samples.

Usage: make_bad_inputs.py OUT_DIR MODELS_DIR
"""

import io
import os
import struct
import sys
import zipfile
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper


def model_with_initializer(init, path):
    """A model whose only output is the initializer `init`."""
    out = helper.make_tensor_value_info(init.name, init.data_type, None)
    graph = helper.make_graph([], "g", [], [out], [init])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def declared(name, dims, dtype=TensorProto.FLOAT):
    t = TensorProto()
    t.name = name
    t.data_type = dtype
    t.dims.extend(dims)
    return t


def external(name, location, offset, length, dims):
    t = declared(name, dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def overflow_reshape(path):
    """x: f32[2^40, 2^40] flattened by Reshape(-1): the element count overflows int64."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**40, 2**40])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    shape = helper.make_tensor("shape", TensorProto.INT64, [1], [-1])
    node = helper.make_node("Reshape", ["x", "shape"], ["y"], name="flatten")
    graph = helper.make_graph([node], "g", [x], [y], [shape])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def npy_bytes(array):
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def lying_zip(path, claimed):
    """One deflated entry of a few bytes whose central directory claims `claimed` bytes."""
    data = npy_bytes(np.zeros(4, np.float32))
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    deflated = comp.compress(data) + comp.flush()
    name = b"x.npy"
    crc = zlib.crc32(data)
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(deflated), len(data),
                        len(name), 0) + name + deflated
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, crc, len(deflated),
                          claimed, len(name), 0, 0, 0, 0, 0, 0) + name
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central), len(local), 0)
    with open(path, "wb") as f:
        f.write(local + central + end)


def zeros_bomb(path, nbytes):
    """A real deflated archive of `nbytes` zero bytes (tiny on disk)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("x.npy", npy_bytes(np.zeros(nbytes // 4, np.float32)))


def data_faults(out, models):
    d = dict(np.load(os.path.join(models, "digits", "train.npz")))
    x, labels = d["x"][:64].copy(), d["labels"][:64].copy()
    np.savez(os.path.join(out, "nan.npz"), x=np.where(np.arange(64)[:, None] == 5, np.nan, x).astype(np.float32),
             labels=labels)
    inf = x.copy()
    inf[9, 3] = -np.inf
    np.savez(os.path.join(out, "inf.npz"), x=inf, labels=labels)
    bad = labels.copy()
    bad[7] = 10
    np.savez(os.path.join(out, "label-range.npz"), x=x, labels=bad)
    neg = labels.copy()
    neg[3] = -1
    np.savez(os.path.join(out, "label-negative.npz"), x=x, labels=neg)
    np.savez(os.path.join(out, "label-float.npz"), x=x, labels=labels.astype(np.float32))
    np.savez(os.path.join(out, "empty.npz"), x=x[:0], labels=labels[:0])
    # Finite, but so large that the logits overflow float32: the loss is not finite.
    np.savez(os.path.join(out, "huge.npz"), x=np.where(np.arange(64)[:, None] == 40, 3e38, x).astype(np.float32),
             labels=labels)
    np.savez(os.path.join(out, "small.npz"), x=x, labels=labels)


def main():
    out, models = sys.argv[1], sys.argv[2]
    os.makedirs(os.path.join(out, "model"), exist_ok=True)
    model_with_initializer(declared("w", [10**6, 10**6]), os.path.join(out, "huge-tensor.onnx"))
    model_with_initializer(declared("w", [2**32, 2**32, 4]), os.path.join(out, "overflow-tensor.onnx"))
    overflow_reshape(os.path.join(out, "overflow-reshape.onnx"))
    with open(os.path.join(out, "model", "weights.bin"), "wb") as f:
        f.write(b"\0" * 16)
    os.symlink("/etc/passwd", os.path.join(out, "model", "link.bin"))
    for name, loc, off, length in (("escape", "../" * 40 + "etc/passwd", 0, 12),
                                   ("absolute", "/etc/passwd", 0, 12),
                                   ("symlink", "link.bin", 0, 12),
                                   ("past-end", "weights.bin", 8, 12)):
        model_with_initializer(external("w", loc, off, length, [3]), os.path.join(out, "model", name + ".onnx"))
    lying_zip(os.path.join(out, "lying.npz"), 2**32 - 2)
    zeros_bomb(os.path.join(out, "bomb.npz"), 64 << 20)
    data_faults(out, models)


if __name__ == "__main__":
    main()
