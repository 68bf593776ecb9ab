#!/usr/bin/env bash
# caliper watch against the built-in engine while a few streamed requests
# run: the summary shows time with requests running, the JSON agrees with
# it, --pid fits a memory slope, Ctrl-C prints the summary and exits 0, and
# bad flags exit 2 naming the flag and the value. Pacing mode (--pace-ms)
# makes each request last a known time: 100 chunks x 10 ms = 1 s.
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || { ok "# SKIP jq not available"; finish; }

start_serve --preset tiny --pace-ms 10 || { not_ok "serve started"; finish; }
req() { curl -sN "$SERVE_URL/v1/completions" -H 'Content-Type: application/json' \
          -d '{"prompt":"hello","max_tokens":100,"stream":true}' >/dev/null; }
( sleep 0.3; req & req & req & wait; sleep 0.2; req & wait ) &
load=$!
out=$E2E_TMP/watch.out; js=$E2E_TMP/watch.json
"$CALIPER" watch "$SERVE_URL" --interval 50ms --duration 3s --pid "$SERVE_PID" --ceiling 16 \
  --json "$js" >"$out" 2>"$E2E_TMP/watch.err"
rc=$?
wait $load
check "watch --duration exits 0" [ "$rc" -eq 0 ]
cat "$out"
check "summary names the gauge" grep -q 'vllm:num_requests_running' "$out"
check "summary has the verdict" grep -q 'benchmark at concurrency' "$out"
check "summary states the ceiling is not the operating point" grep -q 'ceiling of 16 is a ceiling' "$out"
busy=$(jq '.running.busy_s' "$js")
jqe() { jq -e "$@" >/dev/null; }
check "requests ran part of the time (busy $busy s)" jqe '.running.busy_s > 0.5 and .running.busy_s < 3' "$js"
check "three ran at once at some point" jqe '.running.max >= 3' "$js"
check "idle share and busy time agree" \
  jqe '((1 - .running.share["0"]) * .watched_s - .running.busy_s | fabs) < 0.01' "$js"
check "histogram seconds add up to the watched time" \
  jqe '([.running.histogram[].seconds] | add) - .watched_s | fabs < 0.01' "$js"
check "watched about 3 s" jqe '.watched_s > 2.7 and .watched_s <= 3.05' "$js"
check "waiting gauge found" jqe '.waiting.gauge == "vllm:num_requests_waiting"' "$js"
check "pid readings and a slope" jqe '.processes[0].readings >= 20 and (.processes[0].slope_bytes_per_s | type) == "number"' "$js"
check "pid line printed" grep -qE "pid +$SERVE_PID +rss .* slope .* MB/min" "$out"

# Ctrl-C: the summary still comes, exit 0
"$CALIPER" watch "$SERVE_URL" --interval 50ms >"$E2E_TMP/int.out" 2>/dev/null &
w=$!
sleep 0.6; kill -INT $w; wait $w; rc=$?
check "Ctrl-C exits 0" [ "$rc" -eq 0 ]
check "Ctrl-C prints the summary" grep -q 'verdict' "$E2E_TMP/int.out"

# --metric override and a metric that is not there
"$CALIPER" watch "$SERVE_URL" --interval 50ms --duration 200ms --metric caliper:num_requests_running \
  >"$E2E_TMP/m.out" 2>&1
check "--metric override used" grep -q 'gauge      caliper:num_requests_running' "$E2E_TMP/m.out"
"$CALIPER" watch "$SERVE_URL" --duration 200ms --metric nope:x >/dev/null 2>"$E2E_TMP/m.err"; rc=$?
check "absent --metric exits 1 naming it" sh -c "[ $rc -eq 1 ] && grep -q 'nope:x' '$E2E_TMP/m.err'"

# nothing listening: exit 1
"$CALIPER" watch http://127.0.0.1:9 --duration 200ms >/dev/null 2>"$E2E_TMP/c.err"; rc=$?
check "unreachable server exits 1" [ "$rc" -eq 1 ]

# usage errors name flag and value
bad() { local want=$1; shift; "$CALIPER" watch "$@" >/dev/null 2>"$E2E_TMP/u.err"; local rc=$?
        if [ $rc -eq 2 ] && grep -qF -- "$want" "$E2E_TMP/u.err"; then ok "usage: $want"; else
        not_ok "usage: $want (rc $rc: $(cat "$E2E_TMP/u.err"))"; fi; }
bad '--interval: "0.001ms"' "$SERVE_URL" --interval 0.001ms
bad '--duration: "soon"' "$SERVE_URL" --duration soon
bad '--pid: "0"' "$SERVE_URL" --pid 0
bad '--ceiling: "-3"' "$SERVE_URL" --ceiling -3
bad 'URL: "ftp://x"' ftp://x
bad 'URL: missing' --interval 1s
check "--help exits 0" "$CALIPER" watch --help
finish
