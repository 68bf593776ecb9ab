#!/usr/bin/env bash
# caliper run end to end against the built-in engine (tiny preset): a shot
# series over two concurrency cells lands in the store; runs/show/export
# read it back with counts that add up; bad flags exit 2 naming flag and
# value; Ctrl-C leaves an interrupted run with its requests; a server killed
# mid-run ends the run without a hang.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
T=$E2E_TMP
DB=$T/c.db
RUN=(--preset tiny --prompt-tokens 64 --max-tokens 16 --db "$DB" --no-telemetry)

have_py=1; need python3 "reading the store" || have_py=0

# --- a shot series over two cells is stored and printed --------------------
"$CALIPER" run "${RUN[@]}" --shots 3 --concurrency 1,2 --requests 4 --label e2e-first \
  --json "$T/run.json" >"$T/out" 2>"$T/err"
rc=$?
check "run --shots 3 --concurrency 1,2 exits 0" [ $rc -eq 0 ]
check "the table has both throughput columns" grep -q "aggregate tok/s.*per-request tok/s" "$T/out"
check "the protocol line names the shot series" grep -q "── shots · concurrency 1 · prompt 64 tok" "$T/out"
check "the TTFT, ITL, TPOT and E2E columns are there" \
  grep -q "TTFT p50/p95/p99 ms  *ITL p50/p99 ms  *TPOT p50 ms  *E2E p50/p99 ms" "$T/out"
check "prompt lengths were exact (server /tokenize)" grep -q "prose, unique, exact" "$T/out"
check "the client self-check line is printed" grep -q "^client self-check: .* µs CPU per chunk" "$T/out"
check "the stored line names the run" grep -q "^stored: run 1 in $DB" "$T/out"
check "progress went to stderr, not stdout" grep -q "shot 3 · c2" "$T/err"
check "no progress on stdout" bash -c "! grep -q 'shot 3 · c2:' '$T/out'"

"$CALIPER" runs --db "$DB" >"$T/runs"
check "runs lists the run with its label, 6 cells and status ok" \
  grep -qE "^ +1 .* e2e-first .* built-in tiny .* 6  ok$" "$T/runs"
"$CALIPER" show e2e-first --db "$DB" >"$T/show"
check "show prints both columns again" grep -q "aggregate tok/s.*per-request tok/s (median)" "$T/show"
check "show prints the same cells table as run" \
  diff <(sed -n '/── cells/,/^read:/p' "$T/out") <(sed -n '/── cells/,/^read:/p' "$T/show")
"$CALIPER" export 1 --csv --db "$DB" >"$T/csv"
check "export --csv has a header and 6 cell rows" [ "$(wc -l <"$T/csv")" -eq 7 ]
check "csv header carries vLLM names" grep -q "output_throughput,per_request_output_throughput_median,mean_ttft_ms" "$T/csv"

if [ $have_py -eq 1 ]; then
  "$CALIPER" export 1 --json --db "$DB" >"$T/exp.json"
  check "export --json parses and its counts add up" python3 - "$T/exp.json" "$T/run.json" <<'PY'
import json, sys
for path in sys.argv[1:]:
    d = json.load(open(path))
    assert d["run"]["status"] == "ok", d["run"]["status"]
    assert len(d["cells"]) == 6
    for c in d["cells"]:
        st = [r["status"] for r in c["requests"]]
        assert len(st) == c["num_prompts"] == c["completed"] + c["failed"] == 4, c
        assert c["failed"] == sum(c[k] for k in ("n_http_error", "n_timeout", "n_connect_error", "n_stream_error", "n_cancelled"))
        assert c["total_output_tokens"] == 16 * c["completed"], c["total_output_tokens"]
        assert c["output_throughput"] > 0 and c["per_request_output_throughput_median"] > 0
        assert c["shot_kind"] in ("cold", "warm"), c["shot_kind"]
    assert [c["shot_kind"] for c in d["cells"]][:2] == ["cold", "cold"]
    s = [c for c in d["view"]["cells"] if c["fingerprint"]["shot_first"] == 2]
    assert len(s) == 2 and s[0]["fingerprint"]["shot_last"] == 3, d["view"]["cells"]
    assert s[0]["metrics"]["completed"] == 8 and s[0]["metrics"]["total_output_tokens"] == 128
    assert d["run"]["protocol"]["shots"] == 3 and d["run"]["target"]["kind"] == "builtin"
PY
fi
check "the requests table holds every request with its chunk timestamps" \
  [ "$(sqlite3 "$DB" "select count(*) from requests where length(chunks) = 4*n_chunks and n_chunks >= 8")" -eq 24 ]

# --- bad flags exit 2 and name the flag and the value ------------------------
bad() { # bad FLAG VALUE ARGS...
  local flag=$1 val=$2; shift 2
  "$CALIPER" run --db "$T/bad.db" "$@" >/dev/null 2>"$T/bad"
  local rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$flag" "$T/bad" && grep -qF -- "$val" "$T/bad"; then
    ok "run $* exits 2 naming $flag and \"$val\""
  else
    not_ok "run $* exits 2 naming $flag and \"$val\" (rc $rc: $(head -1 "$T/bad"))"
  fi
}
bad --concurrency 0 --concurrency 0
bad --concurrency x --concurrency 1,x
bad --shots -1 --shots -1
bad --content poetry --content poetry
bad --rest soon --rest soon
bad --api grpc --api grpc
bad --body "[1]" --body "[1]"
bad --cold "--url" --url http://127.0.0.1:9 --cold
bad --url ftp://x --url ftp://x
check "no run was started by a bad flag" [ ! -s "$T/bad.db" ] 

# --- Ctrl-C mid-run: stored, marked interrupted, exit 130 -------------------
"$CALIPER" run "${RUN[@]}" --concurrency 2 --requests 6 --shots 50 --label e2e-int \
  >"$T/int.out" 2>"$T/int.err" &
pid=$!
for _ in $(seq 1 2400); do grep -qs "^shot 2 · " "$T/int.err" && break; sleep 0.05; done
kill -INT $pid
t0=$(date +%s)
wait $pid; rc=$?
check "Ctrl-C ends the run with exit 130" [ $rc -eq 130 ]
check "Ctrl-C ends the run within 10 s" [ $(( $(date +%s) - t0 )) -lt 10 ]
check "the run says it was interrupted" grep -q "interrupted" "$T/int.err"
check "the stored run is marked interrupted" \
  [ "$(sqlite3 "$DB" "select status from runs where label='e2e-int'")" = interrupted ]
check "the interrupted run kept its requests, every one with one status" \
  [ "$(sqlite3 "$DB" "select (sum(completed) > 0) || (sum(n_requests) = (select count(*) from requests q join cells c2 on q.cell_id = c2.id where c2.run_id = r.id)) || (sum(n_requests) = sum(completed + failed)) from cells c join runs r on r.id = c.run_id where r.label = 'e2e-int'")" = 111 ]
check "it stopped long before its 50 shots" \
  [ "$(sqlite3 "$DB" "select count(*) < 50 from cells c join runs r on r.id = c.run_id where r.label = 'e2e-int'")" = 1 ]
port=$(sqlite3 "$DB" "select json_extract(target,'\$.url') from runs where label='e2e-int'" | grep -oE '[0-9]+$')
check "no engine is left answering after Ctrl-C" \
  bash -c "[ -n '$port' ] && ! (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null"

# --- a server killed mid-run: reported, not waited on -------------------------
start_serve --preset tiny
timeout -s KILL 40 "$CALIPER" run --url "$SERVE_URL" --prompt-tokens 64 --max-tokens 16 --db "$DB" --no-telemetry \
  --concurrency 2 --requests 6 --shots 50 --label e2e-killed --idle-timeout 5s \
  >"$T/kill.out" 2>"$T/kill.err" &
pid=$!
for _ in $(seq 1 2400); do grep -qs "^shot 2 · " "$T/kill.err" && break; sleep 0.05; done
kill -9 "$SERVE_PID"
t0=$(date +%s)
wait $pid; rc=$?
check "a run whose server died exits 1" [ $rc -eq 1 ]
check "it ended promptly (no hang)" [ $(( $(date +%s) - t0 )) -lt 20 ]
check "the run is stored as failed" \
  [ "$(sqlite3 "$DB" "select status from runs where label='e2e-killed'")" = failed ]
check "its counts add up: every request sent has one status" \
  [ "$(sqlite3 "$DB" "select sum(n_requests) = sum(completed + failed) and sum(completed) > 0 and sum(n_requests) = (select count(*) from requests q join cells c2 on q.cell_id = c2.id where c2.run_id = r.id) from cells c join runs r on r.id = c.run_id where r.label='e2e-killed'")" = 1 ]
check "the failure is named" grep -q "stopped answering" "$T/kill.err"
finish
