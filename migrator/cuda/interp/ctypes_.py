"""The C type vocabulary of the interpreter: one dtype table plus C's conversion rules.

Every runtime value carries a `CType`, never a bare numpy dtype, because C semantics depend on
the declared type (signedness for `>>` and `<`, rank for the usual arithmetic conversions), and
several C types share a numpy dtype (`long` and `long long`). Types numpy lacks natively
(`__nv_bfloat16`) come from `ml_dtypes`, as the house rules ask.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import ml_dtypes
import numpy as np

# object: cooperative groups and functors; struct: a local aggregate (fields in `fields`)
Kind = Literal["bool", "int", "float", "vec", "ptr", "array", "void", "object", "struct"]


@dataclass(frozen=True)
class CType:
    """A C type. `elem` is the element of a vector/array or the pointee of a pointer."""

    name: str
    kind: Kind
    dtype: np.dtype | None = None
    rank: int = 0  # integer conversion rank (bool < char < short < int < long long)
    elem: CType | None = None
    count: int = 1  # vector lanes or array length (outermost dimension)
    fields: tuple[tuple[str, CType], ...] = ()  # structs: (name, type) in declaration order
    nominal: int = 0  # sizeof() where storage differs from the C type (traced values)

    def __eq__(self, other: object) -> bool:
        # identity first: every converted value and operator compares the same few type
        # objects (hundreds of thousands of times in a looping kernel's run)
        if self is other:
            return True
        if other.__class__ is not CType:
            return NotImplemented
        o: CType = other  # type: ignore[assignment]
        return (
            self.name == o.name and self.kind == o.kind and self.dtype == o.dtype
            and self.rank == o.rank and self.elem == o.elem and self.count == o.count
            and self.fields == o.fields and self.nominal == o.nominal
        )  # fmt: skip

    def __hash__(self) -> int:
        return self._hash

    # (derived facts are computed once per type object: a frozen type never changes, and a
    # looping kernel asks each of them hundreds of thousands of times)
    @functools.cached_property
    def _hash(self) -> int:
        return hash((self.name, self.kind, self.dtype, self.rank, self.elem, self.count,
                     self.fields, self.nominal))  # fmt: skip

    @functools.cached_property
    def is_arith(self) -> bool:
        return self.kind in ("bool", "int", "float")

    @functools.cached_property
    def is_float(self) -> bool:
        return self.kind == "float"

    @functools.cached_property
    def is_signed(self) -> bool:
        return self.dtype is not None and np.issubdtype(self.dtype, np.signedinteger)

    @functools.cached_property
    def is_pointer_like(self) -> bool:
        return self.kind in ("ptr", "array")

    @functools.cached_property
    def size(self) -> int:
        """sizeof() in bytes."""
        if self.kind in ("vec", "array"):
            assert self.elem is not None
            return self.elem.size * self.count
        if self.kind == "ptr":
            return 8
        if self.kind == "void":
            return 1
        if self.kind == "struct":  # fields at their natural alignment, padded to the largest
            off = 0
            for _, f in self.fields:
                off = -(-off // f.align) * f.align + f.size
            return -(-off // self.align) * self.align if self.fields else 1
        if self.nominal:
            return self.nominal
        assert self.dtype is not None
        return self.dtype.itemsize

    @functools.cached_property
    def align(self) -> int:
        """alignof(): CUDA aligns float2/int2 to 8 and float4/int4 to 16 bytes."""
        if self.kind == "struct":
            return max((f.align for _, f in self.fields), default=1)
        if self.kind == "array":
            assert self.elem is not None
            return self.elem.align
        if self.kind == "vec":
            assert self.elem is not None
            return self.elem.size * (self.count if self.count in (2, 4) else 1)
        return self.size

    @functools.cached_property
    def field_offsets(self) -> tuple[int, ...]:
        """Byte offset of each struct field (natural alignment, as `size` lays them out)."""
        out, off = [], 0
        for _, f in self.fields:
            off = -(-off // f.align) * f.align
            out.append(off)
            off += f.size
        return tuple(out)

    @functools.cached_property
    def storage(self) -> CType:
        """The scalar type a buffer of these values holds: a struct whose leaves share one type
        and leave no padding is stored as that type (`{float m; float d;}` as floats); any other
        struct as bytes, read through typed views."""
        if self.kind != "struct":
            return self.scalar
        leaves: list[CType] = []  # (non-struct fields: scalars, vectors, arrays)
        stack = [f for _, f in self.fields]
        while stack:
            t = stack.pop()
            stack.extend(f for _, f in t.fields) if t.kind == "struct" else leaves.append(t)
        dtypes = {leaf.scalar.dtype for leaf in leaves}
        if len(dtypes) == 1 and None not in dtypes and sum(x.size for x in leaves) == self.size:
            return leaves[0].scalar
        return UCHAR

    def field_index(self, name: str) -> int | None:
        return next((k for k, (n, _) in enumerate(self.fields) if n == name), None)

    @functools.cached_property
    def scalar(self) -> CType:
        """The innermost scalar element of an array/vector type (itself for scalars)."""
        t = self
        while t.kind in ("array", "vec"):
            assert t.elem is not None
            t = t.elem
        return t

    def __str__(self) -> str:
        return self.name


def _int(name: str, dt: type, rank: int) -> CType:
    return CType(name, "int", np.dtype(dt), rank)


BOOL = CType("bool", "bool", np.dtype(np.bool_), 0)
CHAR = _int("char", np.int8, 1)
SCHAR = _int("signed char", np.int8, 1)
UCHAR = _int("unsigned char", np.uint8, 1)
SHORT = _int("short", np.int16, 2)
USHORT = _int("unsigned short", np.uint16, 2)
INT = _int("int", np.int32, 3)
UINT = _int("unsigned int", np.uint32, 3)
LONG = _int("long", np.int64, 4)  # LP64, as nvcc on Linux
ULONG = _int("unsigned long", np.uint64, 4)
LLONG = _int("long long", np.int64, 5)
ULLONG = _int("unsigned long long", np.uint64, 5)
HALF = CType("__half", "float", np.dtype(np.float16))
BF16 = CType("__nv_bfloat16", "float", np.dtype(ml_dtypes.bfloat16))
FLOAT = CType("float", "float", np.dtype(np.float32))
DOUBLE = CType("double", "float", np.dtype(np.float64))
VOID = CType("void", "void")


@functools.lru_cache(maxsize=4096)  # one object per type: identity compares hit
def vec(elem: CType, n: int) -> CType:
    return CType(f"{elem.name}{n}", "vec", elem.dtype, elem=elem, count=n)


@functools.lru_cache(maxsize=4096)  # one object per type: identity compares hit
def ptr(elem: CType) -> CType:
    return CType(f"{elem.name}*", "ptr", np.dtype(np.int64), elem=elem)


@functools.lru_cache(maxsize=4096)  # one object per type: identity compares hit
def array(elem: CType, n: int) -> CType:
    return CType(f"{elem.name}[{n}]", "array", np.dtype(np.int64), elem=elem, count=n)


# One table from spelled names to types; `unsigned`/`long` combinations are normalised first.
NAMED: dict[str, CType] = {
    "bool": BOOL,
    "char": CHAR,
    "signed char": SCHAR,
    "unsigned char": UCHAR,
    "short": SHORT,
    "unsigned short": USHORT,
    "int": INT,
    "signed": INT,
    "unsigned": UINT,
    "unsigned int": UINT,
    "long": LONG,
    "unsigned long": ULONG,
    "long long": LLONG,
    "unsigned long long": ULLONG,
    "float": FLOAT,
    "double": DOUBLE,
    "void": VOID,
    "size_t": ULONG,
    "ptrdiff_t": LONG,
    "int8_t": CHAR,
    "uint8_t": UCHAR,
    "int16_t": SHORT,
    "uint16_t": USHORT,
    "int32_t": INT,
    "uint32_t": UINT,
    "int64_t": LLONG,
    "uint64_t": ULLONG,
    "__half": HALF,
    "half": HALF,
    "__nv_bfloat16": BF16,
    "nv_bfloat16": BF16,
    # <sys/types.h> and <stdint.h>/<stddef.h> names, as glibc defines them on x86-64 Linux
    "uint": UINT,
    "ushort": USHORT,
    "ulong": ULONG,
    "uchar": UCHAR,
    "ssize_t": LONG,
    "intptr_t": LONG,
    "uintptr_t": ULONG,
    "int_fast32_t": LONG,
    # <cuda_fp8.h> storage types: fp8 bits in unsigned integers
    "__nv_fp8_storage_t": UCHAR,
    "__nv_fp8x2_storage_t": USHORT,
    "__nv_fp8x4_storage_t": UINT,
    "uint_fast32_t": ULONG,
}
for _base, _t in (("float", FLOAT), ("double", DOUBLE), ("int", INT), ("uint", UINT),
                  ("char", SCHAR), ("uchar", UCHAR), ("short", SHORT), ("ushort", USHORT),
                  ("long", LONG), ("ulong", ULONG), ("longlong", LLONG),
                  ("ulonglong", ULLONG)):  # fmt: skip
    for _n in (1, 2, 3, 4):
        NAMED[f"{_base}{_n}"] = vec(_t, _n)
for _name, _t in (("__half2", HALF), ("half2", HALF), ("__nv_bfloat162", BF16),
                  ("nv_bfloat162", BF16)):  # fmt: skip
    NAMED[_name] = vec(_t, 2)
NAMED["dim3"] = CType("dim3", "vec", UINT.dtype, elem=UINT, count=3)  # uint3 with 1-defaults

_BY_DTYPE = {t.dtype: t for t in (BOOL, SCHAR, UCHAR, SHORT, USHORT, INT, UINT, LONG, ULONG,
                                    HALF, BF16, FLOAT, DOUBLE)}  # fmt: skip


def from_dtype(dtype: np.dtype) -> CType | None:
    """The C type of a numpy element type (int64 is `long`, as on LP64 Linux)."""
    return _BY_DTYPE.get(np.dtype(dtype))


# Sign-agnostic spelling normalisation for sized_type_specifier ("unsigned long int" etc.).
_SIZED: dict[tuple[bool, str], CType] = {
    (False, "char"): CHAR,
    (True, "char"): UCHAR,
    (False, "short"): SHORT,
    (True, "short"): USHORT,
    (False, "int"): INT,
    (True, "int"): UINT,
    (False, "long"): LONG,
    (True, "long"): ULONG,
    (False, "long long"): LLONG,
    (True, "long long"): ULLONG,
}


def sized(words: list[str]) -> CType:
    """Type of a `sized_type_specifier` from its words, e.g. ['unsigned', 'long', 'long']."""
    unsigned = "unsigned" in words
    longs = words.count("long")
    if longs >= 2:
        base = "long long"
    elif longs == 1:
        base = "long"
    elif "short" in words:
        base = "short"
    elif "char" in words:
        base = "char"
    else:
        base = "int"
    if "double" in words:
        return DOUBLE
    return _SIZED[(unsigned, base)]


_UNSIGNED_OF = {INT: UINT, LONG: ULONG, LLONG: ULLONG}


def promote(t: CType) -> CType:
    """Integer promotion: everything narrower than int (and bool) computes as int."""
    if t.kind == "bool" or (t.kind == "int" and t.rank < INT.rank):
        return INT
    return t


def arith_result(a: CType, b: CType, float_type: CType = FLOAT) -> CType:
    """The usual arithmetic conversions (C11 6.3.1.8) for two scalar operand types.

    Half/bf16 operands compute in float (CUDA's operators convert through float and round back,
    which for + - * / gives the same bits as native half arithmetic).
    """
    key = (a, b, float_type)
    t = _ARITH_RESULT.get(key)
    if t is None:
        t = _ARITH_RESULT[key] = _arith_result(a, b, float_type)
    return t


_ARITH_RESULT: dict[tuple[CType, CType, CType], CType] = {}  # (few distinct type pairs)


def _arith_result(a: CType, b: CType, float_type: CType) -> CType:
    if a.kind == "float" or b.kind == "float":
        if DOUBLE in (a, b):
            return DOUBLE
        if a in (HALF, BF16) and b == a:
            return a
        return float_type
    a, b = promote(a), promote(b)
    if a == b:
        return a
    if a.is_signed == b.is_signed:
        return a if a.rank >= b.rank else b
    s, u = (a, b) if a.is_signed else (b, a)
    if u.rank >= s.rank:
        return u
    if s.dtype is not None and u.dtype is not None and s.dtype.itemsize > u.dtype.itemsize:
        return s
    return _UNSIGNED_OF.get(s, u)


@functools.lru_cache(maxsize=4096)
def literal_type(text: str) -> tuple[CType, int | float]:
    """Type and value of a C number literal (unsuffixed float literals are double)."""
    t = text.lower().replace("'", "")
    is_hex = t.startswith("0x")
    if not is_hex and any(c in t for c in ".e") or (not is_hex and t.endswith("f")):
        if t.endswith("f"):
            return FLOAT, float(t[:-1])
        return DOUBLE, float(t.rstrip("l"))
    suffix = ""
    while t and t[-1] in "ul":
        suffix = t[-1] + suffix
        t = t[:-1]
    value = int(t, 0) if not (t.startswith("0") and t[1:].isdigit()) else int(t, 8)
    unsigned = "u" in suffix
    longs = suffix.count("l")
    # C: the first of int, (unsigned int,) long, ... that can represent the value
    candidates: list[CType]
    if longs == 0:
        candidates = [UINT, ULONG] if unsigned else [INT, LONG]
        if not unsigned and (is_hex or text.startswith("0")):
            candidates = [INT, UINT, LONG, ULONG]
    elif longs == 1:
        candidates = [ULONG] if unsigned else [LONG, ULONG]
    else:
        candidates = [ULLONG] if unsigned else [LLONG, ULLONG]
    for c in candidates:
        info = np.iinfo(c.dtype)
        if info.min <= value <= info.max:
            return c, value
    return ULLONG, value
