"""The bytes of RocksDB's table files as the data is, not as it lies on disk: Oxigraph's
RocksDB compresses the table blocks of its lower levels (and of every bulk load) with LZ4, and
an LZ4 block holds repeated text as back-references, so a plain byte search of a ``.sst``
misses text that is there (issue 33 F9: a purge test could pass with the text on disk).

:func:`sst_contents` reads a block-based table (RocksDB's documented format: the footer, the
metaindex and index blocks, each block followed by a 5-byte trailer of compression type and
checksum) and returns every block decompressed. Pure Python, no dependency: an LZ4 block
decoder is a few lines. Unknown compression types or footers raise: a test never passes
because a file could not be read.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

_MAGIC = 0x88E241B785F4CFF7  # kBlockBasedTableMagicNumber
_FOOTER = 53
_TRAILER = 5  # compression type (1 byte) + checksum (4 bytes)
_NONE, _LZ4 = 0, 4  # kNoCompression, kLZ4Compression


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7


def _length(data: bytes, i: int, value: int) -> tuple[int, int]:
    """An LZ4 length: 15 in the token means more bytes follow, each added, until one < 255."""
    if value == 15:
        while True:
            byte = data[i]
            i += 1
            value += byte
            if byte != 255:
                break
    return value, i


def lz4_block(src: bytes, size: int) -> bytes:
    """Decode one LZ4 block (the raw block format, no frame) of ``size`` bytes."""
    out = bytearray()
    i = 0
    while len(out) < size:
        token = src[i]
        literals, i = _length(src, i + 1, token >> 4)
        out += src[i:i + literals]
        i += literals
        if len(out) >= size:
            break
        offset = src[i] | src[i + 1] << 8
        match, i = _length(src, i + 2, token & 15)
        match += 4
        start = len(out) - offset
        if offset == 0 or start < 0:
            raise ValueError("not an LZ4 block: a match before the start")
        if offset >= match:
            out += out[start:start + match]
        else:  # an overlapping match repeats the last `offset` bytes
            for k in range(match):
                out.append(out[start + k])
    if len(out) != size:
        raise ValueError(f"not an LZ4 block: {len(out)} bytes, not {size}")
    return bytes(out)


def _block(data: bytes, offset: int, size: int) -> bytes:
    raw = data[offset:offset + size]
    kind = data[offset + size]
    if kind == _NONE:
        return raw
    if kind == _LZ4:  # format_version >= 2: the decompressed size, then the LZ4 block
        n, i = _varint(raw, 0)
        return lz4_block(raw[i:], n)
    raise ValueError(f"a block of compression type {kind}: not read by this helper")


def _restarts_end(contents: bytes) -> int:
    restarts = struct.unpack_from("<I", contents, len(contents) - 4)[0] & 0x7FFFFFFF
    return len(contents) - 4 - 4 * restarts


def _entries(contents: bytes) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) of a block whose entries carry their value's length (the metaindex)."""
    end, i, key = _restarts_end(contents), 0, b""
    while i < end:
        shared, i = _varint(contents, i)
        unshared, i = _varint(contents, i)
        length, i = _varint(contents, i)
        key = key[:shared] + contents[i:i + unshared]
        i += unshared
        yield key, contents[i:i + length]
        i += length


def _index_handles(contents: bytes) -> Iterator[tuple[int, int]]:
    """(offset, size) of the blocks an index block points at. The values of an index are
    delta encoded (format_version >= 4): no value length; an entry sharing no key bytes holds
    the whole handle, another only its size's difference from the previous (zigzag varint),
    its offset following the previous block and trailer."""
    end, i = _restarts_end(contents), 0
    previous = (0, 0)
    while i < end:
        shared, i = _varint(contents, i)
        unshared, i = _varint(contents, i)
        i += unshared
        if shared == 0:
            offset, i = _varint(contents, i)
            size, i = _varint(contents, i)
        else:
            zigzag, i = _varint(contents, i)
            offset = previous[0] + previous[1] + _TRAILER
            size = previous[1] + ((zigzag >> 1) ^ -(zigzag & 1))
        previous = (offset, size)
        yield previous


def sst_contents(data: bytes) -> bytes:
    """Every block of the table file ``data``, decompressed, one after the other."""
    footer = data[-_FOOTER:]
    version, magic = struct.unpack_from("<IQ", footer, _FOOTER - 12)
    if magic != _MAGIC:
        raise ValueError("not a block-based table file")
    if version >= 6:  # the metaindex ends where the footer starts; the index is in it
        meta_size = struct.unpack_from("<I", footer, 13)[0]
        meta = (len(data) - _FOOTER - meta_size - _TRAILER, meta_size)
        index = None
    else:
        offset, i = _varint(footer, 1)
        size, i = _varint(footer, i)
        meta = (offset, size)
        index_offset, i = _varint(footer, i)
        index_size, i = _varint(footer, i)
        index = (index_offset, index_size)
    metaindex = dict(_entries(_block(data, *meta)))
    if index is None:
        offset, i = _varint(metaindex[b"rocksdb.index"], 0)
        size, i = _varint(metaindex[b"rocksdb.index"], i)
        index = (offset, size)
    handles = list(_index_handles(_block(data, *index)))
    expected = 0
    for offset, size in handles:  # the data blocks lie one after the other from the start
        if offset != expected:
            raise ValueError("an index this helper does not read (partitioned?)")
        expected = offset + size + _TRAILER
    blocks = [_block(data, *handle) for handle in handles]
    blocks += [_block(data, *_handle(value)) for value in metaindex.values()]
    return b"".join(blocks)


def _handle(value: bytes) -> tuple[int, int]:
    offset, i = _varint(value, 0)
    size, _ = _varint(value, i)
    return offset, size
