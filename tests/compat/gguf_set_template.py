#!/usr/bin/env python3
"""make compat: write a copy of a GGUF file with tokenizer.chat_template set
to a template file's text (the models caliper exports carry none), so both
engines serve the same model under a real model's template.

    gguf_set_template.py IN.gguf TEMPLATE.jinja OUT.gguf

The key/value section gains one string pair (or has the old one replaced);
the tensor infos and the tensor data are copied unchanged, the data again
at the file's alignment (general.alignment, default 32)."""
import struct, sys

SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

def main():
    src, tpl, dst = sys.argv[1:4]
    b = open(src, "rb").read()
    if b[:4] != b"GGUF":
        sys.exit(f"{src}: not a GGUF file")
    version, n_t, n_kv = struct.unpack_from("<IQQ", b, 4)
    o = 24
    def string():
        nonlocal o
        n, = struct.unpack_from("<Q", b, o)
        s = b[o + 8:o + 8 + n]
        o += 8 + n
        return s
    def value(t):
        nonlocal o
        if t == 8:
            return string()
        if t == 9:
            et, n = struct.unpack_from("<IQ", b, o)
            o += 12
            for _ in range(n):
                value(et)
            return None
        v = b[o:o + SIZES[t]]
        o += SIZES[t]
        return v
    kvs, align = [], 32
    for _ in range(n_kv):
        start = o
        key = string()
        t, = struct.unpack_from("<I", b, o)
        o += 4
        v = value(t)
        if key == b"general.alignment":
            align, = struct.unpack("<I", v)
        if key != b"tokenizer.chat_template":
            kvs.append(b[start:o])
    infos_start = o
    for _ in range(n_t):
        string()
        nd, = struct.unpack_from("<I", b, o)
        o += 4 + 8 * nd + 4 + 8
    infos = b[infos_start:o]
    data = b[(o + align - 1) // align * align:]
    text = open(tpl, "rb").read()
    key = b"tokenizer.chat_template"
    kv = struct.pack("<Q", len(key)) + key + struct.pack("<IQ", 8, len(text)) + text
    head = b"GGUF" + struct.pack("<IQQ", version, n_t, len(kvs) + 1) + b"".join(kvs) + kv + infos
    head += b"\0" * (-len(head) % align)
    open(dst, "wb").write(head + data)

if __name__ == "__main__":
    main()
