"""A shared library without code: what the stand-ins install in place of NVIDIA's libraries."""

from __future__ import annotations

import struct


def elf_shared_object(soname: str, note: str) -> bytes:
    """A minimal x86-64 ELF shared library with a soname and no symbols or code.

    ldconfig indexes it under its soname and dlopen() loads it, as with the real library; any symbol lookup
    fails. The note lands in the string table, so `strings` on the file says what it is.
    """
    strtab = b"\0" + soname.encode() + b"\0" + note.encode() + b"\0"
    header_size, phdr_size, phdr_count = 64, 56, 3
    strtab_at = header_size + phdr_size * phdr_count
    symtab_at = _align(strtab_at + len(strtab), 8)
    hash_at = symtab_at + 24  # one null symbol
    dynamic_at = _align(hash_at + 16, 8)  # DT_HASH: nbucket=1, nchain=1, bucket[0]=0, chain[0]=0
    dynamic = [(4, hash_at), (5, strtab_at), (6, symtab_at), (10, len(strtab)), (11, 24), (14, 1), (0, 0)]
    total = dynamic_at + 16 * len(dynamic)

    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)  # 64-bit, little-endian, System V
    out = bytearray(ident)
    out += struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, header_size, 0, 0, header_size, phdr_size, phdr_count, 64, 0, 0
    )  # ET_DYN, EM_X86_64, no section headers
    read_write = 6  # writable: the dynamic loader relocates the dynamic section in place
    out += struct.pack("<IIQQQQQQ", 1, read_write, 0, 0, 0, total, total, 0x1000)  # PT_LOAD
    out += struct.pack(
        "<IIQQQQQQ",
        2,
        read_write,
        dynamic_at,
        dynamic_at,
        dynamic_at,
        16 * len(dynamic),
        16 * len(dynamic),
        8,
    )  # PT_DYNAMIC
    out += struct.pack("<IIQQQQQQ", 0x6474E551, read_write, 0, 0, 0, 0, 0, 16)  # PT_GNU_STACK: not executable
    out += strtab
    out += bytes(symtab_at - len(out)) + bytes(24)
    out += struct.pack("<IIII", 1, 1, 0, 0)
    out += bytes(dynamic_at - len(out))
    for tag, value in dynamic:
        out += struct.pack("<qQ", tag, value)
    assert len(out) == total
    return bytes(out)


def _align(offset: int, alignment: int) -> int:
    return (offset + alignment - 1) // alignment * alignment
