#!/usr/bin/env bash
# The probe's event loops: the probe's fault suite again on the poll()
# backend (CALIPER_LOOP=poll, the generic POSIX one) and on two loops, the
# CLI's fault script under poll, and `caliper run --loops 1` against
# `--loops 2` on one workload: the same counts and the same per-request
# records, in the same places.
. "$(dirname "$0")/lib.sh"

UT="$BUILD/tests/test_probe_faults"
FS="$BUILD/tests/helpers/faultserver"
{ [ -x "$UT" ] && [ -x "$FS" ]; } || { not_ok "test_probe_faults and the fault server are built"; finish; }
need jq "the stored JSON's checks" || finish
here=$(cd "$(dirname "$0")" && pwd)

# unit suite on other loops (it prints cmocka lines; its exit status decides)
suite() { # name, then env assignments
  local name=$1; shift
  if (cd "$here/../.." && env "$@" "$UT") >"$E2E_TMP/$name.log" 2>&1; then
    ok "probe fault suite, $name: $(grep -oE 'PASSED  \] [0-9]+' "$E2E_TMP/$name.log")"
  else
    not_ok "probe fault suite, $name"; grep -E 'FAILED|ERROR|LINE' "$E2E_TMP/$name.log" | head -10 | sed 's/^/    /'
  fi
}
suite poll CALIPER_LOOP=poll
suite "two loops" CALIPER_TEST_PROBE_LOOPS=2
suite "poll, three loops" CALIPER_LOOP=poll CALIPER_TEST_PROBE_LOOPS=3

# the CLI's fault script, every category, under poll
if CALIPER_LOOP=poll bash "$here/test_probe_faults.sh" >"$E2E_TMP/cli_poll.log" 2>&1; then
  ok "CLI fault script under poll ($(grep -c '^ok ' "$E2E_TMP/cli_poll.log") checks)"
else
  not_ok "CLI fault script under poll"; grep '^not ok' "$E2E_TMP/cli_poll.log" | sed 's/^/    /'
fi
check "--loops 0 is a usage error (exit 2)" \
  bash -c "'$CALIPER' run --loops 0 >/dev/null 2>&1; [ \$? -eq 2 ]"

# --loops 1 and --loops 2: one workload, the same records
start_faultserver "$FS" || { not_ok "fault server starts"; finish; }
CALIPER_LOOP=nosuch timeout 30 "$CALIPER" run --url "http://127.0.0.1:$PORT/normal" --model m \
  --requests 1 --no-telemetry --db "$E2E_TMP/x.db" >"$E2E_TMP/nosuch.out" 2>&1
check "a loop backend not built here fails the run (exit 1)" [ $? -eq 1 ]
case "$(cal_platform)" in
  linux) built="epoll, poll" ;; darwin) built="kqueue, poll" ;; *) built="poll" ;;
esac
check "... and says which backends there are ($built)" \
  grep -qF "CALIPER_LOOP: \"nosuch\" is not an event-loop backend of this build ($built)" "$E2E_TMP/nosuch.out"
for l in 1 2; do
  timeout 60 "$CALIPER" run --url "http://127.0.0.1:$PORT/normal" --model m --requests 12 \
    --concurrency 4,3 --max-tokens 8 --prompt-tokens 16 --no-telemetry --seed 1 --loops $l --shots 1 \
    --db "$E2E_TMP/runs.db" --json "$E2E_TMP/l$l.json" >"$E2E_TMP/l$l.out" 2>&1
  check "--loops $l: the run completes" [ -s "$E2E_TMP/l$l.json" ]
done
rec='[.cells[] | {concurrency, completed, failed, n_cancelled, total_output_tokens,
      requests: [.requests[] | {status, http_status, error, prompt_tokens, output_tokens,
                                token_source, n_chunks, k: (.itl_ms | length)}]}]'
jq -S "$rec" "$E2E_TMP/l1.json" >"$E2E_TMP/l1.rec" 2>/dev/null
jq -S "$rec" "$E2E_TMP/l2.json" >"$E2E_TMP/l2.rec" 2>/dev/null
check "--loops 1 and 2: the same counts and per-request records" \
  cmp -s "$E2E_TMP/l1.rec" "$E2E_TMP/l2.rec"
check "... and there are records to compare (2 cells, 24 requests)" \
  [ "$(jq '[.[].requests[]] | length' "$E2E_TMP/l1.rec")" = 24 ]
check "--loops 2: every request completed" \
  [ "$(jq '[.cells[].completed] | add' "$E2E_TMP/l2.json")" = 24 ]
check "--loops 2 is recorded in the run's protocol" \
  [ "$(jq '[.run.protocol | .. | objects | select(has("loops")) | .loops] | first' "$E2E_TMP/l2.json")" = 2 ]
finish
