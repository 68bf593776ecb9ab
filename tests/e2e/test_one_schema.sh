#!/usr/bin/env bash
# One run, one number per field: a stored run gives the identical value for
# every field in `show`, `report --format json`, `export --json` and
# `compare`, and `caliper run`'s own final print is `show`'s. Two runs: a
# multi-shot run over two concurrencies, and a --cold run (every shot a fresh
# process). One document family: export's "view" is the report's document,
# key for key, under the same format_version, and the exported file read back
# gives it again; older versions of both still load. export --json is the
# reference; each other output is parsed with
# python3 and checked field by field against it (show at the field's
# decimals, the others exactly). One key per quantity: the report's metrics
# are schema keys only, its samples series keys only, and a single shot's
# samples are exactly export's per-request values under the same key, each
# by its formula from the recorded times (decode and server decode too).
# docs/schema.md lists the per-request table export carries. With
# --keep-chunks none the pooled ITL p50/p99 of show, export and the report
# equal the percentiles recomputed here from the stored histograms. The
# proxy's decode_tok_s is the run's decode formula under the run's key.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
T=$E2E_TMP
DB=$T/one.db
COMMON=(--preset tiny --prompt-tokens 48 --max-tokens 10 --requests 3 --db "$DB" --seed 5 --no-telemetry)

run_one() {   # label, extra args...
  local label=$1; shift
  "$CALIPER" run "${COMMON[@]}" --label "$label" "$@" >"$T/$label.run" 2>"$T/$label.err"
  local rc=$?
  if [ $rc -gt 1 ] || ! grep -q '^stored: run' "$T/$label.run"; then
    not_ok "caliper run $label (exit $rc)"; tail -5 "$T/$label.err"; return 1
  fi
  ok "caliper run $label"
}

check_run() {   # label
  local L=$1
  "$CALIPER" show "$L" --db "$DB" >"$T/$L.show" 2>"$T/$L.show.err" || { not_ok "$L: show"; return; }
  "$CALIPER" export "$L" --json --db "$DB" -o "$T/$L.export.json" || { not_ok "$L: export --json"; return; }
  "$CALIPER" report "$L" --format json --db "$DB" -o "$T/$L.report.json" 2>/dev/null || { not_ok "$L: report --format json"; return; }
  "$CALIPER" compare "$L" "$L" --all --no-ci --format json --db "$DB" >"$T/$L.compare.json" 2>/dev/null
  [ -s "$T/$L.compare.json" ] || { not_ok "$L: compare --format json"; return; }
  check "$L: run's final print is show's" cmp -s "$T/$L.run" "$T/$L.show"
  # the exported file read back gives the same view
  "$CALIPER" report "$T/$L.export.json" --format json -o "$T/$L.back.json" >/dev/null 2>&1
  check "$L: the exported file read back is the report's document" python3 -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
sys.exit(0 if a == b and a["cells"] else 1)' "$T/$L.back.json" "$T/$L.report.json"
  python3 - "$T/$L" <<'PY'
import json, re, sys
base = sys.argv[1]
exp = json.load(open(base + ".export.json"))
rep = json.load(open(base + ".report.json"))
cmpj = json.load(open(base + ".compare.json"))
show = open(base + ".show").read()
schema = {f["key"]: f for f in exp["schema"]}
fails, checked = [], {"report": 0, "compare": 0, "show": 0}

def same(a, b):
    return a == b or (isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= 1e-9 * max(1.0, abs(a)))

# v at d decimals as show may print it: show rounds the stored double, the
# export carries 10 significant digits of it, so where those digits sit on
# a tie of the rounding (2.605000000 of 2.6050000000003) either side is
# the same quantity
def shown(v, d):
    e = abs(v) * 1e-9
    return {"%.*f" % (d, v), "%.*f" % (d, v - e), "%.*f" % (d, v + e)}

# the document family: export's view is the report's document, field for
# field, under one format_version. Fields about when a document was written
# would be left out here; there are none: created_unix is the run's start.
WRITE_TIME = []
view = exp.get("view")
strip = lambda d: {k: v for k, v in d.items() if k not in WRITE_TIME}
if not isinstance(view, dict): fails.append("export has no view")
elif strip(view) != strip(rep): fails.append("export's view differs from the report: keys %r"
                                             % sorted(k for k in set(view) | set(rep) if view.get(k) != rep.get(k)))
if not (exp.get("format_version") == rep.get("format_version") == (view or {}).get("format_version")):
    fails.append("format_version: export %r, view %r, report %r" % (exp.get("format_version"),
                 (view or {}).get("format_version"), rep.get("format_version")))
if "summary" in exp: fails.append("export still carries its own summary")
if rep.get("created_unix") != int(exp["run"]["started_unix_s"]):
    fails.append("created_unix %r is not the run's start %r" % (rep.get("created_unix"), exp["run"]["started_unix_s"]))
for c in (view or {}).get("cells", []):
    extra = set(c["metrics"]) - set(schema)
    if extra: fails.append("view metrics outside the schema: %r" % sorted(extra))

# the pooled cell of each configuration: the view's cell with the last shots
pooled = {}
for c in (view or {}).get("cells", []):
    fp = c["fingerprint"]
    key = (fp["concurrency"], fp["prompt_tokens"])
    if key not in pooled or (fp["shot_last"], fp["shot_first"]) > (pooled[key]["shots_last"], pooled[key]["shots_first"]):
        pooled[key] = dict(c["metrics"], concurrency=fp["concurrency"], prompt_tokens=fp["prompt_tokens"],
                           shots_first=fp["shot_first"], shots_last=fp["shot_last"])
for g in pooled.values():
    where = "c%d/%d shots %d-%d" % (g["concurrency"], g["prompt_tokens"], g["shots_first"], g["shots_last"])
    # report JSON: the cell of the same configuration and shot range
    cells = [c for c in rep["cells"]
             if c["fingerprint"]["concurrency"] == g["concurrency"]
             and c["fingerprint"]["prompt_tokens"] == g["prompt_tokens"]
             and c["fingerprint"].get("shot_first") == g["shots_first"]
             and c["fingerprint"].get("shot_last") == g["shots_last"]]
    if len(cells) != 1:
        fails.append("%s: report has %d cells for it" % (where, len(cells)))
        continue
    m = cells[0]["metrics"]
    for k in schema:
        v = g.get(k)
        if v is None:
            if k in m: fails.append("%s %s: export null, report %r" % (where, k, m[k]))
            continue
        checked["report"] += 1
        if not same(v, m.get(k)): fails.append("%s %s: export %r, report %r" % (where, k, v, m.get(k)))
    # compare: the row of this metric, cell and shot range; the baseline's value
    for row in cmpj["rows"]:
        if (row["concurrency"], row["prompt_tokens"], row["shot_first"], row["shot_last"]) != \
           (g["concurrency"], g["prompt_tokens"], g["shots_first"], g["shots_last"]):
            continue
        k = row["metric"]
        checked["compare"] += 1
        for e in row["entries"]:
            if not same(g.get(k), e["value"]):
                fails.append("%s %s: export %r, compare %r" % (where, k, g.get(k), e["value"]))
        if row["entries"][1]["ratio"] is not None and abs(row["entries"][1]["ratio"] - 1) > 1e-12:
            fails.append("%s %s: a run against itself has ratio %r" % (where, k, row["entries"][1]["ratio"]))
    # show: the cells table row of this configuration, each column at its decimals
    cols = ["output_throughput", "per_request_output_throughput_median",
            "median_ttft_ms", "p95_ttft_ms", "p99_ttft_ms", "median_itl_ms", "p99_itl_ms",
            "median_tpot_ms", "median_e2el_ms", "p99_e2el_ms"]
    sect = show.split("── cells ", 1)[1]
    rows = [l.split() for l in sect.splitlines()[2:] if re.match(r"^\s+\d", l)]
    row = [r for r in rows if r[0] == str(g["concurrency"]) and r[1] == str(g["prompt_tokens"])]
    if len(row) != 1:
        fails.append("%s: show has %d rows for it" % (where, len(row)))
        continue
    nums = [x for x in row[0][2:] if x != "/"]
    want = []
    for k in cols:
        v = g.get(k)
        want.append({"—"} if v is None else shown(v, schema[k]["decimals"]))
    want.append({"%d/%d" % (g["completed"], g["failed"])})
    for k, a, b in zip(cols + ["ok/failed"], nums, want):
        checked["show"] += 1
        if a not in b: fails.append("%s %s: show %s, export %s" % (where, k, a, " or ".join(sorted(b))))
    if len(nums) != len(want): fails.append("%s: show row %r" % (where, row[0]))

# one key per quantity: metrics under schema keys, samples under series keys
series = {f["key"] for f in exp["request_schema"] if f["series"]}
assert all(f["series"] in (None, f["key"]) for f in exp["request_schema"]), exp["request_schema"]
for c in rep["cells"]:
    extra = set(c["metrics"]) - set(schema)
    if extra: fails.append("report metrics outside the schema: %r" % sorted(extra))
    extra = set(c.get("samples", {})) - series - {"output_throughput"}
    if extra: fails.append("report samples outside the series: %r" % sorted(extra))
# a single shot's report samples are export's per-request values, in order
keys = [f["key"] for f in exp["request_schema"]]
n_same = 0
for cell in exp["cells"]:
    for q in cell["requests"]:
        if [k for k in keys if k in q] != list(q) or any(k not in q for k in keys if k != "itl_ms"):
            fails.append("request keys %r, table %r" % (list(q), keys)); break
    ok = [q for q in cell["requests"] if q["status"] == "ok"]
    for q in ok:   # each series value by its formula from the recorded fields
        o, fst, lst, e2e = q["output_tokens"], q["ttft_ms"], q["last_token_ms"], q["e2el_ms"]
        want = {"tpot_ms": (e2e - fst) / (o - 1) if o >= 2 and e2e > fst else None,
                "decode_tok_s": (o - 1) / ((lst - fst) / 1e3) if o >= 2 and lst > fst else None,
                "prefill_tok_s": q["prompt_tokens"] / (fst / 1e3),
                "request_tok_s": o / ((e2e - q["send_lag_ms"]) / 1e3),
                "server_decode_tok_s": (q["server_decode_tokens"] - 1) / (q["server_decode_ms"] / 1e3)
                    if q["server_decode_ms"] and q["server_decode_tokens"] >= 2 else None}
        for k, w in want.items():
            v = q[k]
            if (v is None) != (w is None) or (w is not None and abs(v - w) > 1e-6 * abs(w)):
                fails.append("cell %d request %s: %r, its formula %r" % (cell["cell_id"], k, v, w))
        if q.get("itl_ms") is not None and abs(sum(q["itl_ms"]) - (lst - fst)) > 1e-3:
            fails.append("cell %d: itl_ms do not add up to last - first" % cell["cell_id"])
    if cell["shot_kind"] == "warmup": continue
    shot = [c for c in rep["cells"] if c["fingerprint"]["concurrency"] == cell["concurrency"]
            and c["fingerprint"].get("shot_first") == cell["shot_index"] == c["fingerprint"].get("shot_last")]
    if len(shot) != 1: continue
    smp = shot[0].get("samples", {})
    for k in series:
        if k == "itl_ms": want = [g for q in ok for g in q.get("itl_ms") or []]
        else: want = [q[k] for q in ok if q[k] is not None]
        got = smp.get(k, [])
        if len(got) != len(want) or any(abs(a - b) > 1e-9 * max(1, abs(b)) for a, b in zip(got, want)):
            fails.append("shot %d c%d: report samples %s %r, export %r" % (cell["shot_index"], cell["concurrency"], k, got, want))
        n_same += 1
    # the cell's summary is the statistic of those values: decode and server decode medians
    import statistics
    for k, m in (("decode_tok_s", "decode_tps_median"), ("server_decode_tok_s", "server_decode_tps_median")):
        xs = [q[k] for q in ok if q[k] is not None]
        if xs and (cell[m] is None or abs(statistics.median(xs) - cell[m]) > 1e-9 * cell[m]):
            fails.append("cell %d: %s %r, median of %s %r" % (cell["cell_id"], m, cell[m], k, statistics.median(xs)))
        if not xs and k == "server_decode_tok_s":
            fails.append("cell %d: the built-in server sent no timings" % cell["cell_id"])
if n_same == 0: fails.append("no single-shot cell to compare samples on")
checked["samples"] = n_same

# every number a verdict carries is the same data in export and report
ve = [(v["kind"], v["text"]) for v in exp["run"]["verdicts"]]
vr = [(v["kind"], v["text"]) for v in rep["verdicts"]]
if ve != vr[:len(ve)]: fails.append("verdicts differ: export %r, report %r" % (ve, vr))
for f in fails: print("# " + f)
print("# checked %(report)d report, %(compare)d compare, %(show)d show values, %(samples)d sample series" % checked)
sys.exit(1 if fails or min(checked.values()) == 0 else 0)
PY
  [ $? -eq 0 ] && ok "$L: show, report json, export json and compare agree on every field" \
               || not_ok "$L: show, report json, export json and compare agree on every field"
}

if run_one multi --shots 4 --concurrency 1,2; then
  check_run multi
  # the shots the pool quotes: 2-4 (shot 1 left out), and the report says so
  python3 - "$T/multi.export.json" "$T/multi.report.json" <<'PY'
import json, sys
e, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
kinds = sorted((c["fingerprint"]["concurrency"], c["fingerprint"]["shot_first"], c["fingerprint"]["shot_last"]) for c in r["cells"])
assert kinds == [(1, 1, 1), (1, 2, 4), (2, 1, 1), (2, 2, 4)], kinds
shots = [v for v in e["run"]["verdicts"] if v["kind"] == "shots"]
assert len(shots) == 2 and all(v["group"] in (0, 1) and v["cell"] for v in shots), shots
PY
  check "multi: the pool quotes shots 2-4, shot 1 its own cell, a shot verdict per cell" [ $? -eq 0 ]
fi
if run_one cold --shots 3 --cold; then
  check_run cold
  python3 - "$T/cold.export.json" "$T/cold.report.json" <<'PY'
import json, sys
e, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert {c["fingerprint"]["shot_kind"] for c in r["cells"]} == {"cold"}, r["cells"]
assert sorted((c["fingerprint"]["shot_first"], c["fingerprint"]["shot_last"]) for c in r["cells"]) == [(1, 1), (2, 3)]
PY
  check "cold: show and report quote the same cold shots 2-3" [ $? -eq 0 ]
fi
# ---- older documents of the family still load ---------------------------------
# an export of format_version 1 (its own "summary", no view), rebuilt from its
# requests; and the report's document rewritten as version 2 wrote it
OLD=$here/../fuzz/corpus/fuzz_vllm_import/caliper_export.json
"$CALIPER" report "$OLD" --format json -o "$T/old1.json" >/dev/null 2>&1
python3 - "$OLD" "$T/old1.json" "$T/multi.report.json" "$T/v2.json" <<'PY'
import json, sys
old, got, rep = (json.load(open(p)) for p in sys.argv[1:4])
fails = []
if old["format_version"] != 1 or "view" in old: fails.append("the old export is not a version 1 file")
want = sorted((g["concurrency"], g["completed"], g["output_throughput"]) for g in old["summary"])
have = sorted((c["fingerprint"]["concurrency"], c["metrics"]["completed"], c["metrics"]["output_throughput"])
              for c in got.get("cells", []))
if [w[:2] for w in want] != [h[:2] for h in have] or \
   any(abs(w[2] - h[2]) > 1e-6 * w[2] for w, h in zip(want, have)):
    fails.append("version 1 export read as %r, its summary %r" % (have, want))
rep["format_version"] = 2
json.dump(rep, open(sys.argv[4], "w"))
for f in fails: print("# " + f)
sys.exit(1 if fails else 0)
PY
check "an export of format_version 1 still loads, to its summary's numbers" [ $? -eq 0 ]
"$CALIPER" report "$T/v2.json" --format json -o "$T/v2back.json" >/dev/null 2>&1
check "a caliper-result of format_version 2 still loads, to the same document" python3 -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
b["format_version"] = a["format_version"]
sys.exit(0 if a == b and a["cells"] else 1)' "$T/v2back.json" "$T/multi.report.json"

# ---- the docs list the tables -------------------------------------------------
DOC=$here/../../docs/schema.md
python3 - "$T/multi.export.json" "$DOC" <<'PY'
import json, re, sys
e = json.load(open(sys.argv[1]))
doc = open(sys.argv[2]).read()
fails = []
# the per-request table, row for row
sect = doc.split("## Per-request fields of `caliper export --json`", 1)[1].split("\n## ", 1)[0]
rows = [[x.strip() for x in l.strip().strip("|").split("|")] for l in sect.splitlines()
        if l.startswith("| `")]
want = [["`%s`" % f["key"], f["unit"], "series" if f["series"] else "recorded", f["doc"]]
        for f in e["request_schema"]]
for a, b in zip(rows, want):
    if a != b: fails.append("docs/schema.md has %r, the table %r" % (a, b))
if len(rows) != len(want): fails.append("docs/schema.md lists %d request fields, the table %d" % (len(rows), len(want)))
# the summary fields: every key of the schema named, and nothing else
sect = doc.split("### Summary fields", 1)[1].split("\n### ", 1)[0]
named = set()
for cell in re.findall(r"^\| ([^|]+) \|", sect, re.M):
    for tok in re.findall(r"`([^`]+)`", cell):
        m = re.match(r"^((?:[a-z0-9]+/)+[a-z0-9]+)_(.+)$", tok)
        named |= {p + "_" + m.group(2) for p in m.group(1).split("/")} if m else {tok}
stat = {"mean": "mean", "median": "median", "p95": "p95", "p99": "p99"}
keys = {f["key"] for f in e["schema"]}
if keys - named: fails.append("docs/schema.md does not list %r" % sorted(keys - named))
if named - keys: fails.append("docs/schema.md lists %r, not in the schema" % sorted(named - keys))
for f in fails: print("# " + f)
sys.exit(1 if fails else 0)
PY
check "docs/schema.md lists the per-request and summary tables export carries" [ $? -eq 0 ]

# ---- --keep-chunks none: pooled ITL from the stored histograms ---------------------
# against a served engine that paces its chunks, so the gaps are not all 0
start_serve --preset tiny --pace-ms 2 || not_ok "serve started"
if [ -n "$SERVE_URL" ] && "$CALIPER" run --url "$SERVE_URL" --prompt-tokens 16 --max-tokens 12 --requests 4 \
     --shots 3 --concurrency 2 --keep-chunks none --db "$DB" --label nochunks --seed 5 --no-telemetry \
     >"$T/nochunks.run" 2>"$T/nochunks.err"; then
  ok "caliper run nochunks"
  check_run nochunks
  "$CALIPER" show nochunks --db "$DB" >"$T/nc.show" 2>/dev/null
  "$CALIPER" export nochunks --json --db "$DB" -o "$T/nc.export.json"
  "$CALIPER" report nochunks --format json --db "$DB" -o "$T/nc.report.json" >/dev/null 2>&1
  python3 - "$DB" "$T/nc.export.json" "$T/nc.report.json" "$T/nc.show" <<'PY'
import json, math, sqlite3, struct, sys
db, exp, rep, show = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), open(sys.argv[4]).read()
LIN, SUB, TOP = 128, 64, 43
NB = LIN + (TOP - 7) * SUB + 1
def lo(b):
    if b < LIN: return b
    k = b - LIN; e = 7 + k // SUB
    return (SUB + k % SUB) << (e - 6)
def width(b): return 1 if b < LIN else 1 << ((b - LIN) // SUB + 1)
def decode(blob):
    assert blob[:4] == b"CH1\0", blob[:4]
    n, mn, mx = struct.unpack_from("<QQQ", blob, 4)
    nz = struct.unpack_from("<I", blob, 44)[0]
    c = {}
    for i in range(nz):
        b, k = struct.unpack_from("<HQ", blob, 48 + 10 * i)
        c[b] = k
    return n, mn, mx, c
def pct(h, p):   # type 7 over bucket midpoints clamped to [min, max], as hist.h states
    n, mn, mx, c = h
    def kth(k):
        if k == 0: return mn
        if k == n - 1: return mx
        below = 0
        for b in sorted(c):
            if below + c[b] > k:
                if b == NB - 1: return mx
                return min(max(lo(b) + (width(b) - 1) / 2, mn), mx)
            below += c[b]
        return mx
    r = p / 100 * (n - 1); l = math.floor(r); f = r - l
    v = kth(l)
    if f > 0 and l + 1 < n: v = v + f * (kth(l + 1) - v)
    return v / 1e6
con = sqlite3.connect(db)
run = con.execute("select id from runs where label = 'nochunks'").fetchone()[0]
rows = con.execute("select c.shot_index, h.itl_source, h.itl from cells c join cell_hists h on h.cell_id = c.id "
                   "where c.run_id = ? order by c.seq", (run,)).fetchall()
assert con.execute("select count(*) from requests r join cells c on r.cell_id = c.id where c.run_id = ? "
                   "and r.chunks is not null", (run,)).fetchone()[0] == 0, "chunk times were stored"
fp = max((c["fingerprint"] for c in exp["view"]["cells"]), key=lambda f: (f["shot_last"], f["shot_first"]))
g = dict(next(c["metrics"] for c in exp["view"]["cells"] if c["fingerprint"] == fp),
         shots_first=fp["shot_first"], shots_last=fp["shot_last"])
quoted = [decode(b) for (i, src, b) in rows if g["shots_first"] <= i <= g["shots_last"]]
assert len(quoted) == g["shots_last"] - g["shots_first"] + 1 >= 2 and all(src == "histogram" for (_, src, _) in rows), rows
n = sum(h[0] for h in quoted); c = {}
for h in quoted:
    for b, k in h[3].items(): c[b] = c.get(b, 0) + k
merged = (n, min(h[1] for h in quoted), max(h[2] for h in quoted), c)
want = {"median_itl_ms": pct(merged, 50), "p99_itl_ms": pct(merged, 99)}
fails = []
cells = [x for x in rep["cells"] if x["fingerprint"].get("shot_first") == g["shots_first"]
         and x["fingerprint"].get("shot_last") == g["shots_last"]]
for k, w in want.items():
    if abs(g[k] - w) > 1e-9 * w: fails.append("export %s %r, histograms %r" % (k, g[k], w))
    if len(cells) != 1 or abs(cells[0]["metrics"][k] - w) > 1e-9 * w:
        fails.append("report %s %r, histograms %r" % (k, cells and cells[0]["metrics"].get(k), w))
    # (show rounds C's double; w is Python's from the same histograms: a tie
    # of the rounding may fall either side)
    e = abs(w) * 1e-9
    if not any("%.2f" % x in show for x in (w, w - e, w + e)):
        fails.append("show has no %s %.2f" % (k, w))
if not want["p99_itl_ms"] > 0: fails.append("no ITL measured: %r" % want)
print("# pooled ITL from %d shots' histograms (%d gaps): p50 %.4f ms, p99 %.4f ms"
      % (len(quoted), n, want["median_itl_ms"], want["p99_itl_ms"]))
for f in fails: print("# " + f)
sys.exit(1 if fails else 0)
PY
  check "--keep-chunks none: pooled ITL p50/p99 in show, export and report = the stored histograms merged" [ $? -eq 0 ]
fi

# ---- the proxy's decode figure: the run's formula, the run's key -------------------
if [ -n "$SERVE_URL" ]; then
  plog=$T/proxy.jsonl
  "$CALIPER" proxy --listen 127.0.0.1:0 --upstream "$SERVE_URL" --log "$plog" >/dev/null 2>"$T/proxy.err" &
  E2E_PIDS+=("$!")
  PURL=
  for i in $(seq 1 2400); do
    PURL=$(grep -oE 'http://127\.0\.0\.1:[0-9]+' "$T/proxy.err" 2>/dev/null | head -1)
    [ -n "$PURL" ] && break; sleep 0.05
  done
  "$CALIPER" run --url "$PURL" --prompt-tokens 16 --max-tokens 12 --requests 2 --db "$DB" --label viaproxy \
    --no-telemetry >/dev/null 2>"$T/viaproxy.err"
  "$CALIPER" export viaproxy --json --db "$DB" -o "$T/viaproxy.json" 2>/dev/null
  for i in $(seq 1 2400); do [ "$(wc -l <"$plog" 2>/dev/null)" -ge 2 ] && break; sleep 0.05; done
  python3 - "$plog" "$T/viaproxy.json" <<'PY'
import json, sys
turns = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
exp = json.load(open(sys.argv[2]))
reqs = [q for c in exp["cells"] for q in c["requests"] if q["status"] == "ok"]
fails = []
if len([t for t in turns if t.get("decode_tok_s") is not None]) < 1: fails.append("no proxy turn with a decode speed: %r" % turns)
for t in turns:   # the proxy: (output - 1) / decode_s
    if t.get("decode_tok_s") is None: continue
    w = (t["output_tokens"] - 1) / t["decode_s"]
    # the log prints 8 significant digits: 1e-6 still tells out - 1 from out
    if abs(t["decode_tok_s"] - w) > 1e-6 * w: fails.append("proxy decode_tok_s %r, (out - 1) / decode_s %r" % (t["decode_tok_s"], w))
# a request whose tokens all came in one read (a loaded host can hold a
# 24 ms stream back) has no decode time: null, and no formula to check
if not [q for q in reqs if q.get("decode_tok_s") is not None]:
    fails.append("no request through the proxy with a decode speed: %r" % reqs)
for q in reqs:    # the run, same key: (output - 1) / (last - first)
    if q.get("decode_tok_s") is None:
        if q["last_token_ms"] != q["ttft_ms"]: fails.append("run decode_tok_s null with a decode time: %r" % q)
        continue
    w = (q["output_tokens"] - 1) / ((q["last_token_ms"] - q["ttft_ms"]) / 1e3)
    if abs(q["decode_tok_s"] - w) > 1e-6 * w: fails.append("run decode_tok_s %r, (out - 1) / (last - first) %r" % (q["decode_tok_s"], w))
if not reqs: fails.append("the run through the proxy has no ok request")
# the same request seen by both: the same token count feeds both formulas
if sorted(t["output_tokens"] for t in turns) != sorted(q["output_tokens"] for q in reqs):
    fails.append("proxy output tokens %r, run %r" % ([t["output_tokens"] for t in turns], [q["output_tokens"] for q in reqs]))
for f in fails: print("# " + f)
sys.exit(1 if fails else 0)
PY
  check "proxy decode_tok_s and the run's decode_tok_s: one formula, (output - 1) / (last - first)" [ $? -eq 0 ]
else
  not_ok "serve started for the proxy check"
fi
finish
