"""A small GGUF v3 reader and writer in numpy (no gguf package): enough for the draft-model tools.

Reader: metadata (types kept, so it can be written back), tensor infos, and tensors as numpy arrays
of shape [ne[n-1]]...[ne[0]] (row-major; a 2-D ggml tensor with ne = [in, out] is an [out][in] matrix).
Types read: F32, F16, Q8_0 (dequantized to float32 on request; raw bytes always available).
Writer: metadata in the reader's (key, type, value) form, tensors as F32/F16 arrays or raw bytes of
any type (copied unchanged, e.g. the target's Q8_0 tensors)."""
import struct

import numpy as np

# GGUF value types
U8, I8, U16, I16, U32, I32, F32V, BOOL, STR, ARR, U64, I64, F64 = range(13)
_SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32V: "<f", BOOL: "<?",
           U64: "<Q", I64: "<q", F64: "<d"}
_NP = {U8: np.uint8, I8: np.int8, U16: np.uint16, I16: np.int16, U32: np.uint32, I32: np.int32,
       F32V: np.float32, BOOL: np.bool_, U64: np.uint64, I64: np.int64, F64: np.float64}

# ggml tensor types: (id, block size in elements, bytes per block)
GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8
_TT = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_Q8_0: (32, 34)}


class GgufError(Exception):
    pass


def tensor_nbytes(ttype, n_elements):
    if ttype not in _TT:
        raise GgufError(f"ggml type {ttype} is not supported by this reader")
    bs, bb = _TT[ttype]
    if n_elements % bs:
        raise GgufError(f"{n_elements} elements is not a multiple of the block size {bs}")
    return n_elements // bs * bb


class Reader:
    def __init__(self, path):
        self.path = path
        self.buf = memoryview(open(path, "rb").read())
        self.pos = 0
        if bytes(self.buf[:4]) != b"GGUF":
            raise GgufError(f"{path}: not a GGUF file")
        self.pos = 4
        version = self._u("<I")
        if version != 3:
            raise GgufError(f"{path}: GGUF version {version}, expected 3")
        n_t, n_kv = self._u("<Q"), self._u("<Q")
        self.kv = []  # [(key, type, value)]; arrays: value = (elem_type, list or np.ndarray)
        for _ in range(n_kv):
            key = self._str()
            t = self._u("<I")
            self.kv.append((key, t, self._value(t)))
        self.tensors = []  # [dict(name, ne, type, offset)] in file order
        for _ in range(n_t):
            name = self._str()
            nd = self._u("<I")
            ne = [self._u("<Q") for _ in range(nd)]
            tt = self._u("<I")
            off = self._u("<Q")
            self.tensors.append(dict(name=name, ne=ne, type=tt, offset=off))
        align = int(self.meta("general.alignment", 32))
        self.data0 = (self.pos + align - 1) // align * align
        self.by_name = {t["name"]: t for t in self.tensors}

    def _u(self, fmt):
        v = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def _str(self):
        n = self._u("<Q")
        s = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8")
        self.pos += n
        return s

    def _value(self, t):
        if t in _SCALAR:
            return self._u(_SCALAR[t])
        if t == STR:
            return self._str()
        if t == ARR:
            et, n = self._u("<I"), self._u("<Q")
            if et in _NP:
                a = np.frombuffer(self.buf, dtype=_NP[et], count=n, offset=self.pos).copy()
                self.pos += a.nbytes
                return (et, a)
            return (et, [self._value(et) for _ in range(n)])
        raise GgufError(f"unknown GGUF value type {t}")

    def meta(self, key, default=None):
        for k, _, v in self.kv:
            if k == key:
                return v[1] if isinstance(v, tuple) else v
        if default is None:
            raise GgufError(f"{self.path}: no metadata key '{key}'")
        return default

    def raw(self, name):
        t = self.by_name[name]
        n = int(np.prod(t["ne"]))
        b = self.data0 + t["offset"]
        return bytes(self.buf[b:b + tensor_nbytes(t["type"], n)])

    def array(self, name):
        """The tensor as float32, shape reversed ne (e.g. [out][in])."""
        t = self.by_name[name]
        n = int(np.prod(t["ne"]))
        b = self.data0 + t["offset"]
        shape = list(reversed(t["ne"]))
        if t["type"] == GGML_F32:
            return np.frombuffer(self.buf, np.float32, n, b).reshape(shape).copy()
        if t["type"] == GGML_F16:
            return np.frombuffer(self.buf, np.float16, n, b).astype(np.float32).reshape(shape)
        if t["type"] == GGML_Q8_0:
            blocks = np.frombuffer(self.buf, np.uint8, n // 32 * 34, b).reshape(-1, 34)
            d = blocks[:, :2].copy().view(np.float16).astype(np.float32)  # [n_blocks][1]
            q = blocks[:, 2:].copy().view(np.int8).astype(np.float32)     # [n_blocks][32]
            return (d * q).reshape(shape)
        raise GgufError(f"tensor '{name}' has ggml type {t['type']}, which this reader cannot dequantize")


def _pack_value(t, v):
    if t in _SCALAR:
        return struct.pack(_SCALAR[t], v)
    if t == STR:
        b = v.encode("utf-8")
        return struct.pack("<Q", len(b)) + b
    if t == ARR:
        et, items = v
        head = struct.pack("<IQ", et, len(items))
        if et in _NP:
            return head + np.asarray(items, dtype=_NP[et]).tobytes()
        return head + b"".join(_pack_value(et, x) for x in items)
    raise GgufError(f"cannot write GGUF value type {t}")


class Writer:
    """Collects metadata and tensors, then write(path). Tensors: add_array (F32 or F16 from a numpy
    array of shape reversed ne) or add_raw (bytes of any supported ggml type with its ne)."""

    ALIGN = 32

    def __init__(self):
        self.kv = []
        self.tensors = []  # (name, ne, type, bytes)

    def set(self, key, t, value):
        self.kv = [e for e in self.kv if e[0] != key] + [(key, t, value)]

    def add_array(self, name, a, ttype):
        a = np.asarray(a)
        ne = list(reversed(a.shape))
        dt = {GGML_F32: np.float32, GGML_F16: np.float16}[ttype]
        self.tensors.append((name, ne, ttype, np.ascontiguousarray(a.astype(dt)).tobytes()))

    def add_raw(self, name, ne, ttype, data):
        if len(data) != tensor_nbytes(ttype, int(np.prod(ne))):
            raise GgufError(f"tensor '{name}': {len(data)} bytes do not match its shape {ne}")
        self.tensors.append((name, list(ne), ttype, data))

    def write(self, path):
        out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv)))
        for k, t, v in self.kv:
            out += _pack_value(STR, k) + struct.pack("<I", t) + _pack_value(t, v)
        off = 0
        offsets = []
        for name, ne, tt, data in self.tensors:
            offsets.append(off)
            out += _pack_value(STR, name) + struct.pack("<I", len(ne))
            out += b"".join(struct.pack("<Q", x) for x in ne) + struct.pack("<IQ", tt, off)
            off = (off + len(data) + self.ALIGN - 1) // self.ALIGN * self.ALIGN
        out += b"\0" * ((-len(out)) % self.ALIGN)
        for (name, ne, tt, data), o in zip(self.tensors, offsets):
            out += data
            out += b"\0" * ((-len(out)) % self.ALIGN)
        with open(path, "wb") as f:
            f.write(out)
