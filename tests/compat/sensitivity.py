#!/usr/bin/env python3
"""make compat: how far rounding the activations moves caliper's own
next-token probabilities on one GGUF file. Reads two next_token outputs of
the same file and prompts (A: weights exact, activations in F32; B: the
engine's Q8_0 path, activations rounded to 8 bits per 32-value block as
llama.cpp's CPU kernels round them for quantized weights) and prints the
largest |p_A - p_B| over the ids in both top-5 lists of every prompt."""
import json, sys

def rows(path):
    return [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]

def main():
    a, b = rows(sys.argv[1]), rows(sys.argv[2])
    if len(a) != len(b) or any(x["ids"] != y["ids"] for x, y in zip(a, b)):
        print("the two runs are not of the same prompts", file=sys.stderr)
        return 2
    worst = 0.0
    for x, y in zip(a, b):
        pa = {t["id"]: t["p"] for t in x["top"]}
        pb = {t["id"]: t["p"] for t in y["top"]}
        for i in pa.keys() & pb.keys():
            worst = max(worst, abs(pa[i] - pb[i]))
    print(f"{worst:.6e}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
