#!/usr/bin/env bash
# One run from several clients, against `caliper serve` on loopback:
#  - three `caliper run --shard I/3 --start-at T --json F` merged by
#    `caliper merge`: the counts add up, and every merged percentile equals
#    the one computed (here, in Python, type 7) from the union of the
#    shards' raw records;
#  - `mpirun -np 2 --oversubscribe caliper run --mpi`: one stored run whose
#    request count and percentiles equal those of the union of its ranks'
#    requests, with each rank's clock offset recorded (skipped, with the
#    reason, where mpirun or caliper-mpi is absent);
#  - `--keep-chunks none`: no chunk timestamps stored, the ITL percentiles
#    from the cell's histogram, and the run says so.
. "$(dirname "$0")/lib.sh"
T=$E2E_TMP
start_serve --preset tiny || { not_ok "serve starts"; finish; }
COMMON=(--url "$SERVE_URL" --max-tokens 12 --prompt-tokens 32 --no-telemetry)

# check_union DB RUN_ID: the run's cells against their own stored requests
# (the union of every shard's), and EXPECT requests in all
check_union() {
  python3 - "$1" "$2" <<'EOF'
import sqlite3, sys, struct
db, want = sys.argv[1], int(sys.argv[2])
c = sqlite3.connect(db)
def pct(x, p):
    x = sorted(x)
    if not x: return None
    h = p / 100 * (len(x) - 1); lo = int(h)
    return x[lo] if lo + 1 >= len(x) else x[lo] + (h - lo) * (x[lo + 1] - x[lo])
run = c.execute("select max(id) from runs").fetchone()[0]
cells = c.execute("select id, n_requests, completed, median_ttft_ms, p99_ttft_ms, median_e2el_ms, "
                  "p99_e2el_ms, median_tpot_ms, median_itl_ms, p99_itl_ms from cells where run_id=?", (run,)).fetchall()
total = 0
for cid, n, ok, mt, pt, me, pe, mtp, mi, pi in cells:
    rows = c.execute("select status, sched_ns, send_ns, first_token_ns, end_ns, output_tokens, n_chunks, chunks "
                     "from requests where cell_id=?", (cid,)).fetchall()
    assert len(rows) == n, (len(rows), n)
    total += n
    ttft, e2e, tpot, itl = [], [], [], []
    for st, sched, send, first, end, out, nch, blob in rows:
        if st != 'ok': continue
        base = sched if sched and sched > 0 else send
        e2e.append((end - base) / 1e6)
        ttft.append((first - base) / 1e6)
        if out >= 2 and end > first: tpot.append((end - first) / 1e6 / (out - 1))
        if blob:
            d = struct.unpack('<%dI' % nch, blob)
            t = send; ts = []
            for x in d: t += x * 1000; ts.append(t)
            itl += [(ts[k] - ts[k - 1]) / 1e6 for k in range(1, len(ts))]
    for name, got, want_v in [("median_ttft", mt, pct(ttft, 50)), ("p99_ttft", pt, pct(ttft, 99)),
                              ("median_e2el", me, pct(e2e, 50)), ("p99_e2el", pe, pct(e2e, 99)),
                              ("median_tpot", mtp, pct(tpot, 50)), ("median_itl", mi, pct(itl, 50)),
                              ("p99_itl", pi, pct(itl, 99))]:
        if want_v is None or got is None or abs(got - want_v) > 1e-9 * max(1, abs(want_v)):
            print("cell %d %s: stored %r, union of raw records %r" % (cid, name, got, want_v)); sys.exit(1)
assert total == want, (total, want)
print("union ok: %d requests over %d cells" % (total, len(cells)))
EOF
}

# ---- three shards, merged ----------------------------------------------------
START=$(python3 -c 'import time; print("%.3f" % (time.time() + 3))')
for i in 1 2 3; do
  "$CALIPER" run "${COMMON[@]}" --concurrency 3,6 --requests 9 --seed 11 --shard "$i/3" \
    --start-at "$START" --db "$T/s$i.db" --json "$T/s$i.json" >"$T/s$i.out" 2>"$T/s$i.err" &
  pids[$i]=$!
done
okall=1
for i in 1 2 3; do wait "${pids[$i]}" || { okall=0; cat "$T/s$i.err"; }; done
check "three shards run" [ "$okall" = 1 ]
check "each shard wrote its document" grep -q '"format":"caliper-shard"' "$T/s2.json"
check "merge stores one run" "$CALIPER" merge "$T/s3.json" "$T/s1.json" "$T/s2.json" --db "$T/m.db" \
  --label fleet --json "$T/m.json" >"$T/m.out"
n_shard=0
for i in 1 2 3; do n_shard=$((n_shard + $(sqlite3 "$T/s$i.db" "select sum(n_requests) from cells"))); done
check "the shards' requests add up to the plan's (2 cells x 9)" [ "$n_shard" = 18 ]
check "merged: counts add up, percentiles equal the union's" check_union "$T/m.db" 18
check "merged cells carry the fleet's concurrency" \
  [ "$(sqlite3 "$T/m.db" "select group_concat(concurrency) from cells")" = "3,6" ]
check "the merged protocol records three shards" \
  python3 -c 'import json,sqlite3,sys; p=json.loads(sqlite3.connect(sys.argv[1]).execute("select protocol from runs").fetchone()[0]); sys.exit(not (p["shards"]==3 and len(p["fleet"])==3))' "$T/m.db"
"$CALIPER" merge "$T/s1.json" "$T/s1.json" "$T/s2.json" --db "$T/bad.db" 2>"$T/dup.err"
check "a shard given twice is refused" [ $? = 1 ]
check "... and says which" grep -q "shard" "$T/dup.err"
# shards of one plan measured against another server and model, or under
# another output policy, are not one run: merge names the field and both
# values (it once stored such a pair as one run labelled with A's target)
A_URL=$SERVE_URL
start_serve --preset tiny --model-name caliper-other || { not_ok "second serve starts"; finish; }
B_URL=$SERVE_URL
SHARD=(--max-tokens 12 --prompt-tokens 32 --no-telemetry --concurrency 2 --requests 4 --seed 5)
"$CALIPER" run --url "$A_URL" "${SHARD[@]}" --shard 1/2 --db "$T/x1.db" --json "$T/x1.json" >/dev/null 2>&1
"$CALIPER" run --url "$B_URL" "${SHARD[@]}" --shard 2/2 --db "$T/x2.db" --json "$T/x2.json" >/dev/null 2>&1
"$CALIPER" run --url "$A_URL" "${SHARD[@]}" --shard 2/2 --free-output --db "$T/x3.db" \
  --json "$T/x3.json" >/dev/null 2>&1
"$CALIPER" run --url "$A_URL" "${SHARD[@]}" --shard 2/2 --db "$T/x4.db" --json "$T/x4.json" >/dev/null 2>&1
"$CALIPER" merge "$T/x1.json" "$T/x2.json" --db "$T/x.db" 2>"$T/x.err"; rc=$?
check "shards from two servers: refused (exit $rc)" [ "$rc" = 1 ]
check "... naming the target field and both values" \
  grep -qE "target\.(name|url|model|version) is \"[^\"]*\" in shard 1, \"[^\"]*\" in shard 2" "$T/x.err"
check "... and nothing is stored" \
  bash -c "[ ! -s '$T/x.db' ] || [ \"\$(sqlite3 '$T/x.db' 'select count(*) from runs')\" = 0 ]"
"$CALIPER" merge "$T/x1.json" "$T/x3.json" --db "$T/x.db" 2>"$T/x3.err"; rc=$?
check "a shard with another output policy: refused (exit $rc), naming it" \
  bash -c "[ $rc = 1 ] && grep -q 'protocol.output_policy is' '$T/x3.err'"
check "the same plan against the same server merges" \
  "$CALIPER" merge "$T/x1.json" "$T/x4.json" --db "$T/x.db"
# refused_naming NAME FIELD VALUE1 VALUE2: shard 1 (x1) merged with x$NAME
# is refused, the message naming FIELD with shard 1's and shard 2's values
refused_naming() {
  local rc
  "$CALIPER" merge "$T/x1.json" "$T/x$1.json" --db "$T/r$1.db" 2>"$T/r$1.err"; rc=$?
  [ "$rc" = 1 ] || { echo "rc $rc"; return 1; }
  grep -qF "$2 is $3 in shard 1, $4 in shard 2" "$T/r$1.err" || { cat "$T/r$1.err"; return 1; }
  [ ! -s "$T/r$1.db" ] || [ "$(sqlite3 "$T/r$1.db" 'select count(*) from runs')" = 0 ]
}
# another server of the same model; the same server asked for another
# model; another output length
start_serve --preset tiny || { not_ok "third serve starts"; finish; }
C_URL=$SERVE_URL
"$CALIPER" run --url "$C_URL" "${SHARD[@]}" --shard 2/2 --db "$T/x5.db" --json "$T/x5.json" >/dev/null 2>&1
"$CALIPER" run --url "$A_URL" "${SHARD[@]}" --model caliper-renamed --shard 2/2 --db "$T/x6.db" \
  --json "$T/x6.json" >/dev/null 2>&1
"$CALIPER" run --url "$A_URL" "${SHARD[@]}" --max-tokens 16 --shard 2/2 --db "$T/x7.db" \
  --json "$T/x7.json" >/dev/null 2>&1
check "a shard against another server URL: refused, naming target.url and both URLs" \
  refused_naming 5 target.url "\"$A_URL\"" "\"$C_URL\""
check "a shard asking for another model: refused, naming target.model and both models" \
  refused_naming 6 target.model '"caliper-tiny"' '"caliper-renamed"'
check "a shard with another max_tokens: refused, naming protocol.max_tokens, 12 and 16" \
  refused_naming 7 protocol.max_tokens 12 16
# what makes two shards one run beyond target and protocol (x1 and x4
# merge): one build, one base seed, no cell fuller than its plan, clocks
# that can be one run's. edit SRC DST PYTHON: x4's document changed by the
# expression (d is the document)
edit() {
  python3 - "$T/$1.json" "$T/$2.json" "$3" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"), separators=(",", ":"))
PY
}
edit x4 x8 'd["run"]["build"] = "caliper 0.0.1 (commit deadbeef, other)"'
B1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"]["build"])' "$T/x1.json")
check "a shard of another build: refused, naming run.build and both builds" \
  refused_naming 8 run.build "\"$B1\"" '"caliper 0.0.1 (commit deadbeef, other)"'
edit x4 x9 'd["run"]["protocol"]["seed"] += 1'
check "a shard from another base seed: refused, naming both (5 and 6)" \
  refused_naming 9 "the base seed (protocol.seed less the shard's offset)" 5 6
# 2 planned requests, 10,000 carried: stored "ok" at 459,173 tok/s before
edit x4 x10 'c = d["cells"][0]; c["requests"] = (c["requests"] * 5000)[:10000]'
"$CALIPER" merge "$T/x1.json" "$T/x10.json" --db "$T/r10.db" 2>"$T/r10.err"; rc=$?
check "a cell fuller than its plan: refused (exit $rc), naming both counts" \
  sh -c "[ $rc = 1 ] && grep -q 'shard 2, cell 1 holds 10000 requests where its protocol plans at most 2' '$T/r10.err'"
# offsets as --mpi records them, shard 2's 1e12 ns: stored "ok" at
# 0.016 tok/s instead of 184 before
edit x1 x11 'd["shard"].update(offset_ns=0, offset_uncertainty_ns=0, common_start=True)'
edit x4 x12 'd["shard"].update(offset_ns=10**12, offset_uncertainty_ns=100, common_start=True)'
"$CALIPER" merge "$T/x11.json" "$T/x12.json" --db "$T/r12.db" 2>"$T/r12.err"; rc=$?
check "an offset of 1e12 ns: refused (exit $rc), naming it and where it puts the shard" \
  sh -c "[ $rc = 1 ] && grep -q 'shard.offset_ns 1000000000000 (uncertainty 100 ns) puts its first cell [0-9.]* s before shard 1.s' '$T/r12.err'"
edit x4 x13 'd["shard"].update(offset_ns=0, offset_uncertainty_ns=0, common_start=True)'
"$CALIPER" merge "$T/x11.json" "$T/x13.json" --db "$T/r13.db" 2>"$T/r13.err"; rc=$?
check "an offset uncertain by less than its clock's resolution: refused (exit $rc)" \
  sh -c "[ $rc = 1 ] && grep -q 'uncertain by 0 ns, below the 1 ns resolution of the clock that measured it' '$T/r13.err'"
edit x4 x14 'd["shard"].update(offset_ns=0, offset_uncertainty_ns=500, common_start=True)'
check "the same shards with a sound offset merge" \
  "$CALIPER" merge "$T/x11.json" "$T/x14.json" --db "$T/r14.db"
"$CALIPER" run "${COMMON[@]}" --shard 4/3 --json x.json >/dev/null 2>&1
check "--shard 4/3 is a usage error" [ $? = 2 ]
"$CALIPER" run "${COMMON[@]}" --shard 1/3 >/dev/null 2>&1
check "--shard without --json is a usage error" [ $? = 2 ]
"$CALIPER" run "${COMMON[@]}" --concurrency 2 --shard 1/3 --json x.json >/dev/null 2>"$T/c.err"
check "a concurrency below the shard count is a usage error naming it" \
  grep -q -- '--concurrency: 2 cannot be split over 3 shards' "$T/c.err"

# ---- --keep-chunks none -----------------------------------------------------------
"$CALIPER" run "${COMMON[@]}" --concurrency 2 --requests 6 --shots 1 --keep-chunks none --db "$T/k.db" \
  >"$T/k.out" 2>"$T/k.err"
check "--keep-chunks none runs" [ $? = 0 ]
check "no chunk timestamps are stored" \
  [ "$(sqlite3 "$T/k.db" "select count(*) from requests where chunks is not null")" = 0 ]
check "... though every request counted its chunks" \
  [ "$(sqlite3 "$T/k.db" "select min(n_chunks) from requests")" -ge 2 ]
check "ITL percentiles come from the histogram" \
  [ "$(sqlite3 "$T/k.db" "select itl_source from cell_hists")" = histogram ]
check "... and are there" [ -n "$(sqlite3 "$T/k.db" "select median_itl_ms from cells")" ]
check "the run says so" grep -q "ITL percentiles from histograms" "$T/k.err"
"$CALIPER" show --db "$T/k.db" 1 >"$T/k.show" 2>&1
check "... and show says so again (a stored note)" grep -q "ITL percentiles in 1 of the run.s cells come from histograms" "$T/k.show"
check "the protocol records the budget" grep -q '"keep_chunks":"none"' <(sqlite3 "$T/k.db" "select protocol from runs")
# pooled over shots, the ITL comes from the cells' histograms merged: show,
# export and report give the same figures, never "—" for what was measured
"$CALIPER" run "${COMMON[@]}" --concurrency 2 --requests 6 --shots 3 --keep-chunks none --db "$T/k3.db" \
  >"$T/k3.out" 2>&1
"$CALIPER" export 1 --json --db "$T/k3.db" >"$T/k3.json"
"$CALIPER" report 1 --format json --db "$T/k3.db" -o "$T/k3r.json" >/dev/null 2>&1
"$CALIPER" show 1 --db "$T/k3.db" >"$T/k3.show" 2>&1
itl=$(python3 -c 'import json,sys; s=max(json.load(open(sys.argv[1]))["view"]["cells"], key=lambda c: c["fingerprint"]["shot_last"])["metrics"]; print("%.2f / %.2f" % (s["median_itl_ms"], s["p99_itl_ms"]))' "$T/k3.json" 2>/dev/null)
check "pooled ITL from the histograms in export ($itl)" [ -n "$itl" ]
check "... the same in show" grep -qF "$itl" "$T/k3.show"
check "... and in the report (its pooled cell, to its printed digits)" python3 -c '
import json,sys
e=max(json.load(open(sys.argv[1]))["view"]["cells"], key=lambda c: c["fingerprint"]["shot_last"])["metrics"]
def vals(o):
    if isinstance(o, dict):
        for k, v in o.items():
            if k == "p99_itl_ms" and isinstance(v, (int, float)): yield v
            else: yield from vals(v)
    elif isinstance(o, list):
        for v in o: yield from vals(v)
w = e["p99_itl_ms"]
sys.exit(not any(abs(v - w) <= 1e-8 * max(1, abs(w)) for v in vals(json.load(open(sys.argv[2])))))' "$T/k3.json" "$T/k3r.json"
"$CALIPER" run "${COMMON[@]}" --keep-chunks lots >/dev/null 2>"$T/kb.err"
check "--keep-chunks lots is a usage error" [ $? = 2 ]

# ---- MPI -----------------------------------------------------------------------------
if ! need mpirun "caliper run --mpi"; then
  :
elif [ ! -x "$BUILD/caliper-mpi" ]; then
  if [ "${CI:-}" = true ]; then not_ok "caliper run --mpi: $BUILD/caliper-mpi not built (no mpicc at build time)"
  else echo "skip - caliper run --mpi: $BUILD/caliper-mpi not built (no mpicc at build time)"; fi
else
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm_rsh_agent=
  # Open MPI's own allocations are not caliper's: no leak report from them
  ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0" \
  timeout 300 mpirun -np 2 --oversubscribe "$CALIPER" run --mpi "${COMMON[@]}" --concurrency 4 \
    --requests 10 --db "$T/mpi.db" >"$T/mpi.out" 2>"$T/mpi.err"
  rc=$?
  check "mpirun -np 2 caliper run --mpi exits 0" [ $rc = 0 ]
  [ $rc = 0 ] || tail -20 "$T/mpi.err"
  check "one run is stored" [ "$(sqlite3 "$T/mpi.db" "select count(*) from runs")" = 1 ]
  check "mpi: counts add up, percentiles equal the union of the ranks'" check_union "$T/mpi.db" 10
  check "mpi: each rank's share and clock offset are recorded" \
    python3 -c 'import json,sqlite3,sys; p=json.loads(sqlite3.connect(sys.argv[1]).execute("select protocol from runs").fetchone()[0]); f=p["fleet"]; sys.exit(not (len(f)==2 and all(x["offset_uncertainty_ns"] is not None for x in f)))' "$T/mpi.db"
  check "mpi: rank 0 printed the merged run" grep -q "2 ranks merged into run" "$T/mpi.err"
fi
finish
