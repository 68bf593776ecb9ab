#!/usr/bin/env python3
"""Thirteen engines from one real caliper result (tests/e2e/test_report_groups.sh).

The notes end with a table of 13 engines whose protocols had to be checked by
hand. This writes 13 caliper-result files made from one measured result
(base.json, `caliper report RUN --format json`), each with its own label,
engine and numbers scaled by a known factor, under four protocols:
  group 1  the base protocol (c1): 6 engines, one measured 90 days ago and
           one that reports another version of a same-named engine;
  group 2  concurrency 4: 4 engines;
  group 3  a foreign tool's protocol (vllm bench serve, consecutive
           requests, no cold/warm split): 2 engines;
  group 4  rested shots (15 s before each): 1 engine.
It prints, per group, the engines in the order of their decode tok/s, best
first: the rank the page must draw.

usage: thirteen.py base.json OUTDIR
"""
import json, os, sys

base = json.load(open(sys.argv[1]))
out = sys.argv[2]
os.makedirs(out, exist_ok=True)

ENGINES = [
    # label, group, factor, extra
    ("llama-server b4567", 1, 1.00, {"name": "llama-server", "version": "b4567"}),
    ("mlx-lm 0.21", 1, 1.31, {}),
    ("ollama 0.5 <q4>&co", 1, 0.74, {}),
    ("mine-v2 (kernel fusion, a label long enough to be clipped)", 1, 1.12, {}),
    ("old baseline", 1, 0.93, {"age_days": 90}),
    ("llama-server b4100", 1, 0.88, {"name": "llama-server", "version": "b4100"}),
    ("vllm 0.7 c4", 2, 2.60, {}),
    ("sglang 0.4 c4", 2, 2.85, {}),
    ("tgi 3.0 c4", 2, 2.10, {}),
    ("mine-v2 c4", 2, 2.40, {}),
    ("vllm bench: vllm 0.7", 3, 1.70, {}),
    ("vllm bench: sglang 0.4", 3, 1.95, {}),
    ("mine-v2 rested", 4, 1.05, {}),
]

RATES = {"output_throughput", "per_request_output_throughput_median", "prefill_tps_median",
         "decode_tps_median", "server_decode_tps_median", "request_throughput",
         "total_token_throughput", "goodput"}
TIMES = {k for k in base["cells"][0]["metrics"] if k.endswith("_ms")}

def scaled(metrics, f, group):
    m = dict(metrics)
    for k, v in metrics.items():
        if not isinstance(v, (int, float)) or v is None:
            continue
        if k in RATES:
            m[k] = v * f
        elif k in TIMES:
            m[k] = v / f
    if group == 2:  # four in flight: more in all, less each
        if m.get("output_throughput"): m["output_throughput"] *= 2.5
        if m.get("per_request_output_throughput_median"): m["per_request_output_throughput_median"] *= 0.8
    return m

order = {}
for i, (label, group, f, extra) in enumerate(ENGINES):
    d = json.loads(json.dumps(base))
    d["id"] = "e%02d" % (i + 1)
    d["label"] = label
    d["target"] = {"name": extra.get("name", label), "version": extra.get("version", ""),
                   "url": "http://127.0.0.1:%d" % (8000 + i)}
    d["verdicts"] = []
    d["shots"] = []
    d["telemetry_samples"] = []
    if "age_days" in extra:
        d["created_unix"] -= int(extra["age_days"] * 86400)
    for c in d["cells"]:
        c["metrics"] = scaled(c["metrics"], f, group)
        c.pop("samples", None)
        fp = c["fingerprint"]
        if group == 2:
            fp["concurrency"] = 4
        if group == 3:
            fp.update({"shot_kind": "consecutive", "shot_first": 0, "shot_last": 0, "warmup": -1,
                       "probe": "vllm bench serve", "content": ""})
        if group == 4:
            fp["rest_s"] = 15.0
            if fp["shot_kind"] == "warm":
                fp["shot_kind"] = "rested"
    if group == 3:   # a foreign tool: one cell, no cold/warm split
        d["cells"] = d["cells"][-1:]
    if d.get("shots_fingerprint"):
        d["shots_fingerprint"] = d["cells"][-1]["fingerprint"]
    json.dump(d, open(os.path.join(out, "e%02d.json" % (i + 1)), "w"), indent=1)
    dec = d["cells"][-1]["metrics"].get("decode_tps_median")
    order.setdefault(group, []).append((dec, label))

for g in sorted(order):
    print("group %d: %s" % (g, " | ".join(l for _, l in sorted(order[g], key=lambda t: -t[0]))))
