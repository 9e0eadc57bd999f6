"""Read and write .safetensors files with numpy only (Debian has no python3-safetensors).

bf16 is carried as uint16 bit patterns; `to_bf16` rounds fp32 to nearest-even, `from_bf16` widens
exactly. Tensors are written in the order given, 8-byte aligned header, `__metadata__` optional.
"""
import json
import struct

import numpy as np

_DT = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64,
       "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
       "BOOL": np.bool_, "F8_E4M3": np.uint8, "F8_E8M0": np.uint8}


def to_bf16(x):
    """fp32 array -> uint16 bf16 bit patterns, round to nearest even (NaN kept quiet)."""
    a = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((a + 0x7FFF + ((a >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    rounded[nan] = 0x7FC0
    return rounded


def from_bf16(u16):
    """uint16 bf16 bit patterns -> fp32 (exact)."""
    return (np.asarray(u16, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def save(path, tensors, metadata=None):
    """tensors: list of (name, dtype_str, np.ndarray) or dict name -> (dtype_str, array).
    For "BF16" pass either fp32 values (rounded here) or uint16 bit patterns."""
    items = list(tensors.items()) if isinstance(tensors, dict) else list(tensors)
    norm = []
    for it in items:
        if len(it) == 2:
            name, (dt, arr) = it
        else:
            name, dt, arr = it
        arr = np.asarray(arr)
        if dt == "BF16" and arr.dtype != np.uint16:
            arr = to_bf16(arr)
        else:
            arr = arr.astype(_DT[dt], copy=False)
        norm.append((name, dt, np.ascontiguousarray(arr)))
    # Largest element size first (as the reference safetensors writer does), so every tensor's
    # data is aligned to its element size: the engine reads weights in place and rejects misaligned ones.
    norm.sort(key=lambda t: -t[2].dtype.itemsize)
    header, off = {}, 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, dt, arr in norm:
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + arr.nbytes]}
        off += arr.nbytes
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for _, _, arr in norm:
            f.write(arr.tobytes())


def load(path, widen_bf16=True):
    """Returns dict name -> (dtype_str, np.ndarray). BF16 is widened to fp32 unless widen_bf16=False."""
    with open(path, "rb") as f:
        buf = f.read()
    (hl,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + hl])
    base = 8 + hl
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        arr = np.frombuffer(buf[base + a:base + b], dtype=_DT[info["dtype"]]).reshape(info["shape"])
        if info["dtype"] == "BF16" and widen_bf16:
            arr = from_bf16(arr).reshape(info["shape"])
        out[name] = (info["dtype"], arr)
    return out
