#!/usr/bin/env python3
"""Compare the F32 tensors of two GGUF files by name, value by value.

usage: same_tensors.py A.gguf B.gguf
       same_tensors.py --raw A.gguf B.gguf   tensors of any type: the same
                                             types, shapes and bytes

A GGUF reader of its own (the format's header, key-values skipped, tensor
directory; no numpy), so the check does not go through caliper's reader.
Prints one line per tensor that differs and a summary line; exit 0 when
both files hold the same tensor names, all F32, with bit-identical values,
1 otherwise."""
import struct
import sys

SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class Reader:
    def __init__(self, path):
        self.f = open(path, "rb")

    def take(self, fmt):
        n = struct.calcsize("<" + fmt)
        return struct.unpack("<" + fmt, self.f.read(n))[0]

    def string(self):
        return self.f.read(self.take("Q")).decode("utf-8", "replace")

    def value(self, t):
        if t in SCALAR:
            return self.take(SCALAR[t])
        if t == 8:
            return self.string()
        if t == 9:
            it, n = self.take("I"), self.take("Q")
            if it in SCALAR:   # skip scalars in one read
                self.f.seek(n * struct.calcsize("<" + SCALAR[it]), 1)
                return None
            return [self.value(it) for _ in range(n)]
        raise ValueError("unknown GGUF value type %d" % t)


def tensors(path):
    r = Reader(path)
    if r.f.read(4) != b"GGUF":
        raise ValueError("%s: not a GGUF file" % path)
    r.take("I")
    n_t, n_kv = r.take("Q"), r.take("Q")
    align = 32
    for _ in range(n_kv):
        k = r.string()
        v = r.value(r.take("I"))
        if k == "general.alignment":
            align = v
    info = []
    for _ in range(n_t):
        name = r.string()
        dims = [r.take("Q") for _ in range(r.take("I"))]
        info.append((name, dims, r.take("I"), r.take("Q")))
    start = (r.f.tell() + align - 1) // align * align
    return r.f, start, {name: (dims, t, off) for name, dims, t, off in info}


# ggml's block layouts: type -> (values per block, bytes per block)
BLOCK = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
         8: (32, 34), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
         14: (256, 210), 30: (1, 2)}


def raw(pa, pb):
    fa, sa, ta = tensors(pa)
    fb, sb, tb = tensors(pb)
    bad = 0
    if set(ta) != set(tb):
        print("not the same tensors: only in A %s, only in B %s"
              % (sorted(set(ta) - set(tb)), sorted(set(tb) - set(ta))))
        bad += 1
    nbytes = 0
    for name in sorted(set(ta) & set(tb)):
        (da, ya, oa), (db, yb, ob) = ta[name], tb[name]
        if da != db or ya != yb or ya not in BLOCK:
            print("%s: shape %s type %d vs shape %s type %d" % (name, da, ya, db, yb))
            bad += 1
            continue
        n = 1
        for d in da:
            n *= d
        per, by = BLOCK[ya]
        size = n // per * by
        fa.seek(sa + oa)
        fb.seek(sb + ob)
        if fa.read(size) != fb.read(size):
            print("%s: the bytes differ (type %d)" % (name, ya))
            bad += 1
        nbytes += size
    print("# %d tensors, %d bytes compared; %d differ" % (len(set(ta) & set(tb)), nbytes, bad))
    return 1 if bad else 0


def main():
    if sys.argv[1] == "--raw":
        return raw(sys.argv[2], sys.argv[3])
    fa, sa, ta = tensors(sys.argv[1])
    fb, sb, tb = tensors(sys.argv[2])
    bad = 0
    if set(ta) != set(tb):
        print("not the same tensors: only in A %s, only in B %s"
              % (sorted(set(ta) - set(tb)), sorted(set(tb) - set(ta))))
        bad += 1
    values = 0
    for name in sorted(set(ta) & set(tb)):
        (da, ya, oa), (db, yb, ob) = ta[name], tb[name]
        if da != db or ya != 0 or yb != 0:
            print("%s: shape %s type %d vs shape %s type %d (F32 = 0 needed)" % (name, da, ya, db, yb))
            bad += 1
            continue
        n = 1
        for d in da:
            n *= d
        fa.seek(sa + oa)
        fb.seek(sb + ob)
        left = n * 4
        diff = 0
        while left:
            k = min(left, 1 << 24)
            a, b = fa.read(k), fb.read(k)
            if a != b:
                xa = struct.unpack("<%df" % (k // 4), a)
                xb = struct.unpack("<%df" % (k // 4), b)
                diff += sum(1 for p, q in zip(xa, xb) if struct.pack("<f", p) != struct.pack("<f", q))
            left -= k
        values += n
        if diff:
            print("%s: %d of %d values differ" % (name, diff, n))
            bad += 1
    print("# %d tensors, %d values compared; %d differ" % (len(set(ta) & set(tb)), values, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
