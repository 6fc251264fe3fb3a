"""A GGUF file's header, read within bounds: its metadata (key/value pairs) and its tensor index.

gguf's own GGUFReader maps every element of every metadata array to a numpy view of its own: a
1 MB file holding one array of a million bytes takes about a minute and a GB of memory to read,
and nothing bounds it. This reader streams the header instead: it checks each count and length
against the bounds below BEFORE reading what it announces, keeps only the scalar and string values
(arrays are skipped, their bytes counted), and so refuses a hostile header in one line, in well
under a second, holding at most one string in memory.

The bounds are beyond any real model's, and keep what transformers' conversion later reads with
GGUFReader to about a minute at worst: the largest tokenizer vocabularies (Gemma's) are 262,144
entries, a chat template is tens of KB, a header holds a few dozen keys.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

MAX_KEYS = 4096  # metadata key/value pairs
MAX_TENSORS = 1 << 16
MAX_ARRAY = 1 << 19  # elements of one metadata array
MAX_ARRAY_ELEMENTS = 1 << 20  # of all arrays together (a 262k vocabulary's tokens, scores and types: 786k)
MAX_STRING = 16 << 20  # bytes of one string (key, value, tensor name)
MAX_METADATA_BYTES = 64 << 20  # the whole key/value section
MAX_DIMS = 4  # GGML_MAX_DIMS

# GGUFValueType: the byte size and struct code of each scalar; 8 is STRING, 9 is ARRAY
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
SUPPORTED_VERSIONS = (2, 3)


class GGUFHeaderError(ValueError):
    """Why a file is no GGUF model this reader takes: `kind` is "truncated", "bound" or "corrupt"."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class GGUFTensorInfo:
    name: str
    type: int  # a GGMLQuantizationType value
    n_elements: int
    n_bytes: int  # 0 for a type this gguf does not know (the caller names it)
    end: int  # absolute offset of the end of its data


@dataclass(frozen=True)
class RawGGUFHeader:
    version: int
    metadata: dict[str, object]  # scalars and strings; an array as ("array", element type, count)
    tensors: tuple[GGUFTensorInfo, ...]
    data_offset: int


class _Reader:
    """Exact reads from a file of known size: a short read is a truncated file, never a partial value."""

    def __init__(self, fh: BinaryIO, size: int, order: str = "<"):
        self.fh, self.size, self.order, self.pos = fh, size, order, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > self.size:
            raise GGUFHeaderError("truncated", f"it ends at byte {self.size}, inside its header (byte {self.pos} "
                                               f"announces {n} more)")
        data = self.fh.read(n)
        self.pos += n
        return data

    def skip(self, n: int) -> None:
        if self.pos + n > self.size:
            raise GGUFHeaderError("truncated", f"it ends at byte {self.size}, inside its header (byte {self.pos} "
                                               f"announces {n} more)")
        self.fh.seek(n, 1)
        self.pos += n

    def scalar(self, code: str):
        fmt = self.order + code
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string_length(self, what: str) -> int:
        n = self.scalar("Q")
        if n > MAX_STRING:
            raise GGUFHeaderError("bound", f"its {what} announces a string of {n} bytes (at most {MAX_STRING})")
        return n

    def string(self, what: str) -> str:
        return self.take(self.string_length(what)).decode("utf-8", errors="replace")


def read_raw_header(path: Path) -> RawGGUFHeader:
    """Parse `path`'s GGUF header within the module's bounds; GGUFHeaderError says why not.
    The caller checked the magic; the tensors' data is not read, only where it ends."""
    size = path.stat().st_size
    with open(path, "rb", buffering=1 << 16) as fh:
        reader = _Reader(fh, size)
        if reader.take(4) != b"GGUF":
            raise GGUFHeaderError("corrupt", "it does not start with the GGUF magic")
        version = reader.scalar("I")
        if version & 0xFFFF == 0:  # written on a big-endian machine
            reader.order, version = ">", struct.unpack(">I", struct.pack("<I", version))[0]
        if version not in SUPPORTED_VERSIONS:
            raise GGUFHeaderError("corrupt", f"it is GGUF version {version} (readable: "
                                             f"{', '.join(map(str, SUPPORTED_VERSIONS))})")
        n_tensors, n_keys = reader.scalar("Q"), reader.scalar("Q")
        if n_keys > MAX_KEYS:
            raise GGUFHeaderError("bound", f"its header announces {n_keys} metadata keys (at most {MAX_KEYS})")
        if n_tensors > MAX_TENSORS:
            raise GGUFHeaderError("bound", f"its header announces {n_tensors} tensors (at most {MAX_TENSORS})")
        start = reader.pos
        metadata: dict[str, object] = {}
        elements = 0
        for _ in range(n_keys):
            key = reader.string("metadata key")
            metadata[key] = value = _value(reader, reader.scalar("I"), key, start)
            elements += value[2] if isinstance(value, tuple) else 0
            if elements > MAX_ARRAY_ELEMENTS:
                raise GGUFHeaderError("bound", f"its metadata arrays pass {MAX_ARRAY_ELEMENTS} elements in all at "
                                               f"{key!r}")
            if reader.pos - start > MAX_METADATA_BYTES:
                raise GGUFHeaderError("bound", f"its metadata passes {MAX_METADATA_BYTES} bytes at {key!r}")
        tensors = [_tensor_info(reader) for _ in range(n_tensors)]
        alignment = metadata.get("general.alignment", 32)
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise GGUFHeaderError("corrupt", f"its general.alignment {alignment!r} is not a power of two")
        data_offset = -(-reader.pos // alignment) * alignment
    return RawGGUFHeader(version, metadata, tuple(
        GGUFTensorInfo(name, kind, n, n_bytes, data_offset + offset + n_bytes)
        for name, kind, n, n_bytes, offset in tensors), data_offset)


def _value(reader: _Reader, kind: int, key: str, start: int):
    if kind in _SCALARS:
        return reader.scalar(_SCALARS[kind])
    if kind == _STRING:
        return reader.string(f"value of {key!r}")
    if kind != _ARRAY:
        raise GGUFHeaderError("corrupt", f"its metadata {key!r} has value type {kind}, which GGUF does not define")
    element, count = reader.scalar("I"), reader.scalar("Q")
    if count > MAX_ARRAY:
        raise GGUFHeaderError("bound", f"its metadata array {key!r} announces {count} elements (at most {MAX_ARRAY})")
    if element in _SCALARS:
        nbytes = count * struct.calcsize("<" + _SCALARS[element])
        if reader.pos + nbytes - start > MAX_METADATA_BYTES:
            raise GGUFHeaderError("bound", f"its metadata array {key!r} announces {nbytes} bytes (the whole metadata "
                                           f"may hold {MAX_METADATA_BYTES})")
        reader.skip(nbytes)
    elif element == _STRING:
        for _ in range(count):  # at most MAX_ARRAY lengths read, each string skipped unread
            reader.skip(reader.string_length(f"array {key!r}"))
            if reader.pos - start > MAX_METADATA_BYTES:
                raise GGUFHeaderError("bound", f"its metadata array {key!r} passes {MAX_METADATA_BYTES} bytes")
    else:  # arrays of arrays: the format allows them, no model file uses them
        raise GGUFHeaderError("corrupt" if element != _ARRAY else "bound",
                              f"its metadata array {key!r} holds elements of type {element}"
                              + (" (nested arrays are not read)" if element == _ARRAY else ""))
    return ("array", element, count)


def _tensor_info(reader: _Reader) -> tuple[str, int, int, int, int]:
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    name = reader.string("tensor name")
    n_dims = reader.scalar("I")
    if n_dims > MAX_DIMS:
        raise GGUFHeaderError("corrupt", f"its tensor {name!r} has {n_dims} dimensions (GGML has at most {MAX_DIMS})")
    n = 1
    for _ in range(n_dims):
        n *= reader.scalar("Q")
    kind, offset = reader.scalar("I"), reader.scalar("Q")
    try:
        block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
    except (ValueError, KeyError):
        return name, kind, n, 0, offset
    return name, kind, n, n * type_size // block, offset


def type_name(kind: int) -> str:
    from gguf.constants import GGMLQuantizationType

    try:
        return GGMLQuantizationType(kind).name
    except ValueError:
        return f"type {kind}"
