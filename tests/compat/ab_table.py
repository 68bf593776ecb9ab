#!/usr/bin/env python3
"""Paired A/B ratios from a `caliper run --ab --json FILE` result: for each
column (prefill tok/s, decode tok/s, per-request tok/s, TTFT p50), the shots
of target B paired with target A's by shot index and cell, B / A as a 95 %
t interval on the log ratios (the method of the run's own A/B verdict,
lib/protocol/analysis.c). Prints a Markdown table; exits 1 with fewer than
2 pairs for a column."""
import json, math, statistics, sys

T95 = [0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228]
COLS = [("prefill tok/s (median)", "prefill_tps_median"),
        ("decode tok/s (median)", "decode_tps_median"),
        ("per-request tok/s (median)", "per_request_output_throughput_median"),
        ("TTFT p50 ms", "median_ttft_ms")]

def main():
    d = json.load(open(sys.argv[1]))
    names = sys.argv[2:4] if len(sys.argv) > 3 else ["A", "B"]
    cells = [c for c in d["cells"] if c.get("shot_kind") != "warmup"]
    key = lambda c: (c["shot_index"], c["concurrency"], c["prompt_tokens"])
    a = {key(c): c for c in cells if c["target"] == "A"}
    b = {key(c): c for c in cells if c["target"] == "B"}
    pairs = [(a[k], b[k]) for k in sorted(a) if k in b]
    print(f"| column | {names[0]} (A) | {names[1]} (B) | B ÷ A | 95 % CI | paired shots |")
    print("|---|---:|---:|---:|---|---:|")
    bad = 0
    for label, f in COLS:
        xs = [(pa[f], pb[f]) for pa, pb in pairs if pa.get(f) and pb.get(f)]
        lr = [math.log(vb / va) for va, vb in xs if va > 0 and vb > 0]
        n = len(lr)
        if n < 2:
            print(f"| {label} | — | — | — | fewer than 2 pairs | {n} |")
            bad = 1
            continue
        m, sd = statistics.mean(lr), statistics.stdev(lr)
        t = T95[n - 1] if n - 1 < len(T95) else 1.96
        h = t * sd / math.sqrt(n)
        ma = statistics.median(v for v, _ in xs)
        mb = statistics.median(v for _, v in xs)
        print(f"| {label} | {ma:.1f} | {mb:.1f} | {math.exp(m):.3f}× | "
              f"{math.exp(m - h):.3f}–{math.exp(m + h):.3f} | {n} |")
    return bad

if __name__ == "__main__":
    sys.exit(main())
