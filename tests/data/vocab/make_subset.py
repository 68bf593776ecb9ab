#!/usr/bin/env python3
"""Cut a small vocabulary out of one of llama.cpp's ggml-vocab-*.gguf files,
keeping what a chosen set of its test cases (.inp/.out) needs, so that the
small file tokenizes those cases exactly as the full one does.

  make_subset.py FULL.gguf OUT.gguf OUT.cases MAXLEN

Kept: every token whose text occurs inside a case's text as the tokenizer
sees it (SentencePiece: spaces as U+2581, with the prefix space; BPE: the
text through GPT-2's byte table), the byte and unknown tokens, the control
tokens a tokenizer.ggml.*_token_id names or that chat templates use,
and (BPE) every merge whose joined text occurs there, in the original
order. A merge or a score-ordered pair only ever joins text that occurs in
the word being tokenized, so nothing the full vocabulary would do is lost.
Ids are renumbered in their original order; OUT.cases holds, per case, the
text as a JSON string and llama.cpp's expected ids (from .out) renumbered.
Cases longer than MAXLEN bytes are left out."""
import json, struct, sys

T_STR, T_ARR = 8, 9
FMT = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}


def rd_str(b, p):
    n, = struct.unpack_from('<Q', b, p)
    return b[p + 8:p + 8 + n], p + 8 + n


def rd_val(b, p, t):
    if t == T_STR:
        return rd_str(b, p)
    if t == T_ARR:
        et, n = struct.unpack_from('<IQ', b, p)
        p += 12
        out = []
        for _ in range(n):
            v, p = rd_val(b, p, et)
            out.append(v)
        return (et, out), p
    f = '<' + FMT[t]
    return struct.unpack_from(f, b, p)[0], p + struct.calcsize(f)


def read_kv(path):
    b = open(path, 'rb').read()
    assert b[:4] == b'GGUF'
    _, nt, nkv = struct.unpack_from('<IQQ', b, 4)
    p, kv = 24, []
    for _ in range(nkv):
        k, p = rd_str(b, p)
        t, = struct.unpack_from('<I', b, p)
        v, p = rd_val(b, p + 4, t)
        kv.append((k.decode(), t, v))
    return kv


def w_str(s):
    return struct.pack('<Q', len(s)) + s


def w_val(t, v):
    if t == T_STR:
        return w_str(v)
    if t == T_ARR:
        et, items = v
        return struct.pack('<IQ', et, len(items)) + b''.join(w_val(et, x) for x in items)
    return struct.pack('<' + FMT[t], v)


def gpt2_bytes():
    keep = list(range(0x21, 0x7f)) + list(range(0xa1, 0xad)) + list(range(0xae, 0x100))
    m, n = {}, 0
    for c in range(256):
        if c in keep:
            m[c] = chr(c)
        else:
            m[c] = chr(256 + n)
            n += 1
    return m


def main():
    full, out, cases_out, maxlen = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    kv = read_kv(full)
    d = {k: (t, v) for k, t, v in kv}
    model = d['tokenizer.ggml.model'][1].decode()
    toks = d['tokenizer.ggml.tokens'][1][1]
    types = d['tokenizer.ggml.token_type'][1][1] if 'tokenizer.ggml.token_type' in d else [1] * len(toks)
    inp = open(full + '.inp', 'rb').read().split(b'\n__ggml_vocab_test__\n')
    outl = open(full + '.out').read().split('\n')
    cases = [(t, [int(x) for x in o.split()]) for t, o in zip(inp, outl) if len(t) <= maxlen]
    bm = gpt2_bytes()
    seen = []
    for t, _ in cases:
        if model == 'llama':
            seen.append(('\u2581' + t.decode('utf-8', 'replace')).replace(' ', '\u2581').encode())
        else:
            seen.append(''.join(bm[c] for c in t).encode())
    hay = b'\x00'.join(seen)
    named = {v for k, t, v in kv if k.endswith('_token_id')}
    chat = {b'<|im_start|>', b'<|im_end|>', b'<|eot_id|>', b'<|start_header_id|>',
            b'<|end_header_id|>', b'<|endoftext|>'}
    keep = []
    for i, tx in enumerate(toks):
        if types[i] in (2, 6) or (types[i] == 3 and (i in named or tx in chat)) or (model == 'gpt2' and len(tx.decode()) == 1 and tx in hay) \
                or (tx and tx in hay):
            keep.append(i)
    # every expected id must be kept (an id outside means the cut is wrong)
    need = {x for _, ids in cases for x in ids}
    keep = sorted(set(keep) | need)
    remap = {old: new for new, old in enumerate(keep)}
    kv2 = []
    for k, t, v in kv:
        if not k.startswith('tokenizer.'):
            continue
        if k == 'tokenizer.chat_template':
            continue
        if t == T_ARR and k in ('tokenizer.ggml.tokens', 'tokenizer.ggml.scores',
                                'tokenizer.ggml.token_type'):
            v = (v[0], [v[1][i] for i in keep])
        elif k == 'tokenizer.ggml.merges':
            v = (v[0], [m for m in v[1] if m.replace(b' ', b'', 1) in hay])
        elif k.endswith('_token_id'):
            if v not in remap:
                continue
            v = remap[v]
        kv2.append((k, t, v))
    kv2.insert(0, ('general.architecture', T_STR, b'llama'))
    body = b'GGUF' + struct.pack('<IQQ', 3, 0, len(kv2))
    for k, t, v in kv2:
        body += w_str(k.encode()) + struct.pack('<I', t) + w_val(t, v)
    open(out, 'wb').write(body)
    with open(cases_out, 'w') as f:
        for t, ids in cases:
            f.write(json.dumps(t.decode('utf-8', 'surrogateescape'), ensure_ascii=True) + '\t' +
                    ' '.join(str(remap[x]) for x in ids) + '\n')
    print(f'{out}: {len(keep)} tokens, {len(body)} bytes, {len(cases)} cases', file=sys.stderr)


main()
