"""A small GGUF (v2/v3) reader, written from the format description and
independent of duet's C++ reader: metadata plus F32/F16/BF16 tensors as numpy.

Layout (all little-endian): magic "GGUF", u32 version, u64 tensor_count,
u64 kv_count; kv_count entries (string key, u32 value type, value); then
tensor_count infos (string name, u32 n_dims, u64 ne[n_dims], u32 ggml type,
u64 offset); then padding to general.alignment (default 32) where the data
section begins; each tensor lies at data_start + offset. A string is a u64
length and that many UTF-8 bytes; an array is u32 element type, u64 count,
items. ne[0] is the contiguous dimension, so a tensor with ne = [in, out] is
a numpy (out, in) array.
"""

import struct

import numpy as np

# Metadata value types: scalar ones map to struct codes.
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9

# ggml tensor types this reader dequantizes.
F32, F16, BF16 = 0, 1, 30
TYPE_NAMES = {F32: "F32", F16: "F16", BF16: "BF16"}


class GgufError(Exception):
    pass


class _Cursor:
    def __init__(self, buf):
        self.buf = buf
        self.pos = 0

    def take(self, n):
        if n < 0 or self.pos + n > len(self.buf):
            raise GgufError(f"truncated at offset {self.pos}: need {n} bytes")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        return bytes(self.take(self.unpack("<Q"))).decode("utf-8", errors="surrogateescape")

    def value(self, vtype):
        if vtype in _SCALARS:
            return self.unpack(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype = self.unpack("<I")
            count = self.unpack("<Q")
            if etype in _SCALARS and etype != 7:
                dt = np.dtype(_SCALARS[etype])
                arr = np.frombuffer(self.take(count * dt.itemsize), dtype=dt)
                return arr.tolist()
            return [self.value(etype) for _ in range(count)]
        raise GgufError(f"unknown metadata value type {vtype} at offset {self.pos}")


class Tensor:
    def __init__(self, name, ne, ggml_type, offset):
        self.name = name
        self.ne = ne            # ggml order: ne[0] is the row length
        self.ggml_type = ggml_type
        self.offset = offset    # from the start of the data section

    @property
    def type_name(self):
        return TYPE_NAMES.get(self.ggml_type, f"type{self.ggml_type}")


class GgufFile:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.buf = memoryview(f.read())
        self.path = path
        c = _Cursor(self.buf)
        if bytes(c.take(4)) != b"GGUF":
            raise GgufError(f"{path}: not a GGUF file (bad magic)")
        self.version = c.unpack("<I")
        if self.version not in (2, 3):
            raise GgufError(f"{path}: unsupported GGUF version {self.version}")
        n_tensors = c.unpack("<Q")
        n_kv = c.unpack("<Q")
        self.metadata = {}
        for _ in range(n_kv):
            key = c.string()
            self.metadata[key] = c.value(c.unpack("<I"))
        self.tensors = {}
        for _ in range(n_tensors):
            name = c.string()
            n_dims = c.unpack("<I")
            ne = [c.unpack("<Q") for _ in range(n_dims)]
            ggml_type = c.unpack("<I")
            offset = c.unpack("<Q")
            self.tensors[name] = Tensor(name, ne, ggml_type, offset)
        align = int(self.metadata.get("general.alignment", 32))
        self.data_start = (c.pos + align - 1) // align * align

    def get(self, key, default=None):
        return self.metadata.get(key, default)

    def array(self, name):
        """The tensor as float32 numpy, shaped (ne[n-1], ..., ne[0])."""
        t = self.tensors[name]
        n = int(np.prod(t.ne)) if t.ne else 1
        start = self.data_start + t.offset
        if t.ggml_type == F32:
            a = np.frombuffer(self.buf, dtype="<f4", count=n, offset=start)
        elif t.ggml_type == F16:
            a = np.frombuffer(self.buf, dtype="<f2", count=n, offset=start).astype(np.float32)
        elif t.ggml_type == BF16:
            bits = np.frombuffer(self.buf, dtype="<u2", count=n, offset=start).astype(np.uint32)
            a = (bits << 16).view(np.float32)
        else:
            raise GgufError(f"{self.path}: tensor {name} has type {t.ggml_type}, "
                            "which this reader does not dequantize")
        return a.reshape(list(reversed(t.ne)))
