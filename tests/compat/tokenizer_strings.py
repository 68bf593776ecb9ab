#!/usr/bin/env python3
"""Texts for the tokenizer agreement check (test_tokenizer_server.sh): N
strings from a fixed seed, in kinds that stress different parts of a
tokenizer: prose with contractions and punctuation, code, JSON, CJK, emoji
(with ZWJ sequences and modifiers), whitespace runs (tabs, CR/LF, no-break
and ideographic spaces, U+0085, U+2028), digit runs, special-token texts,
mixtures; and bodies that are not valid UTF-8 or carry lone surrogates,
which both servers must refuse alike. Prints one JSON object a line:
{"kind": K, "body": B} where B is the raw request body (latin-1 text, so
invalid bytes survive)."""
import json, random, sys

N = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
rnd = random.Random(20261203)
WORDS = ("the quick brown fox jumps over lazy dog I'm you're we've they'll she'd "
         "it's don't CAN'T Hello World hello world tokenizer llama qwen naïve café "
         "résumé Straße Ελληνικά русский язык עברית العربية हिन्दी ไทย 1st 2nd "
         "3.14159 1,000,000 e.g. i.e. etc. U.S.A. co-operate well-known").split()
CODE = ["def f(x):\n    return x * 2\n", "int main(void) {\n\tprintf(\"%d\\n\", 42);\n}\n",
        "for (int i = 0; i < n; ++i) { a[i] += b[i]; }", "if x != None and y >= 3:",
        "#include <stdio.h>\n", "    \n\t\t}\n", "const s = `${a}+${b}`;", "x = [1,2,3]  # c",
        "SELECT * FROM t WHERE id = 7;", "<div class=\"a\">&amp;</div>", "a->b.c[0] |= ~0x1F;"]
SPECIAL = ["<s>", "</s>", "<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>",
           "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<0x41>", "[INST]"]
WS = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\u00a0", "\u3000", "\u0085", "\u2028",
      " \n ", "\t\t", "        ", "\v", "\f"]


def cjk():
    ranges = [(0x4e00, 0x9fff), (0x3040, 0x309f), (0x30a0, 0x30ff), (0xac00, 0xd7a3)]
    a, b = rnd.choice(ranges)
    return "".join(chr(rnd.randint(a, b)) for _ in range(rnd.randint(1, 12)))


def emoji():
    base = [chr(rnd.randint(0x1f300, 0x1f64f)) for _ in range(rnd.randint(1, 4))]
    extra = rnd.choice(["", "\u200d\U0001f525", "\U0001f3fd", "\ufe0f", "\u200d\u2642\ufe0f",
                        " \u2705", "\U0001f1fa\U0001f1f8"])
    return "".join(base) + extra


def prose():
    s = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 25)))
    if rnd.random() < 0.5:
        s = s.capitalize() + rnd.choice([".", "!", "?", "...", " :)", ""])
    return s


def jsontext():
    def val(d):
        r = rnd.random()
        if d > 2 or r < 0.3:
            return rnd.choice([rnd.randint(-10**6, 10**6), rnd.random(), True, None, prose()[:20]])
        if r < 0.65:
            return [val(d + 1) for _ in range(rnd.randint(0, 4))]
        return {rnd.choice(WORDS): val(d + 1) for _ in range(rnd.randint(0, 4))}
    return json.dumps(val(0), ensure_ascii=rnd.random() < 0.3, indent=rnd.choice([None, 2]))


def whitespace():
    return "".join(rnd.choice(WS + ["x", "ab"]) for _ in range(rnd.randint(1, 12)))


def digits():
    return "".join(rnd.choice(["3", "33", "333", "1234567", " 42", "0.5", "-7", "1e9"])
                   for _ in range(rnd.randint(1, 6)))


def mixed():
    parts = [prose, cjk, emoji, whitespace, digits, lambda: rnd.choice(CODE),
             lambda: rnd.choice(SPECIAL)]
    return "".join(rnd.choice(parts)() for _ in range(rnd.randint(2, 7)))


KINDS = [("prose", prose), ("code", lambda: rnd.choice(CODE) * rnd.randint(1, 3)),
         ("json", jsontext), ("cjk", cjk), ("emoji", emoji), ("whitespace", whitespace),
         ("digits", digits), ("special", lambda: "".join(rnd.choice(SPECIAL + [" ", "a"])
                                                        for _ in range(rnd.randint(1, 5)))),
         ("mixed", mixed)]

out = []
for i in range(N):
    if i % 50 == 49:   # not UTF-8 (raw bytes) or a lone surrogate escape: refused
        if rnd.random() < 0.5:
            bad = bytes([rnd.choice([0x80, 0xbf, 0xc0, 0xc3, 0xe2, 0xed, 0xf0, 0xf8, 0xff])])
            body = b'{"content": "ab' + bad + b'cd"}'
        else:
            body = b'{"content": "x\\ud800y"}'
        out.append({"kind": "invalid", "body": body.decode("latin-1")})
        continue
    kind, f = KINDS[i % len(KINDS)]
    body = {"content": f()}
    if i % 7 == 0:
        body["add_special"] = True
    if i % 11 == 0:
        body["parse_special"] = False
    out.append({"kind": kind, "body": json.dumps(body)})
for o in out:
    print(json.dumps(o))
