#!/usr/bin/env bash
# `caliper run` against the misbehaving fault server (tests/helpers/faultserver)
# over real loopback sockets: each fault lands in its one category in the
# stored JSON, the categories add up to the requests sent, the exit status
# says a request failed, and nothing hangs (short idle/connect timeouts).
. "$(dirname "$0")/lib.sh"

FS="$BUILD/tests/helpers/faultserver"
[ -x "$FS" ] || { not_ok "the fault server is built ($FS)"; finish; }
need jq "the stored JSON's checks" || finish
start_faultserver "$FS" || { not_ok "fault server starts"; finish; }

# run MODE API [ARGS...]: 4 requests at concurrency 2 against /MODE; leaves
# $E2E_TMP/MODE.json (later flags win over the defaults here)
run_mode() {
  local mode=$1 api=$2
  shift 2
  timeout 60 "$CALIPER" run --url "http://127.0.0.1:$PORT/$mode" --api "$api" --model m \
    --requests 4 --concurrency 2 --max-tokens 8 --prompt-tokens 16 --shots 1 \
    --idle-timeout 400ms --connect-timeout 1s --no-telemetry --seed 1 \
    --db "$E2E_TMP/runs.db" --json "$E2E_TMP/$mode.json" "$@" >"$E2E_TMP/$mode.out" 2>&1
}

# expect MODE API FIELD EXIT [ARGS...]: all 4 requests in FIELD, the sum is 4, exit EXIT
expect() {
  local mode=$1 api=$2 field=$3 want_rc=$4 rc
  shift 4
  run_mode "$mode" "$api" "$@"; rc=$?
  if [ "$rc" -eq 124 ]; then not_ok "$mode: caliper run hung"; return; fi
  local j="$E2E_TMP/$mode.json"
  if [ ! -s "$j" ]; then not_ok "$mode: no JSON written (exit $rc)"; sed 's/^/    /' "$E2E_TMP/$mode.out" | tail -5; return; fi
  local got sum
  got=$(jq ".cells[0].$field" "$j")
  sum=$(jq '.cells[0] | .completed + .n_http_error + .n_timeout + .n_connect_error + .n_stream_error + .n_cancelled' "$j")
  check "$mode ($api): 4 of 4 end as $field (got $got)" [ "$got" = 4 ]
  check "$mode: the categories add up to 4 (got $sum)" [ "$sum" = 4 ]
  check "$mode: exit status $want_rc (got $rc)" [ "$rc" = "$want_rc" ]
}

expect normal       completions completed       0
expect drip         chat        completed       0
expect keepalive    chat        completed       0
expect truncate     completions n_stream_error  1
expect reset        chat        n_stream_error  1
expect garbage      completions n_stream_error  1
expect nodone       completions n_stream_error  1
expect errorevent   chat        n_stream_error  1
expect 429          completions n_http_error    1
expect 500          chat        n_http_error    1
expect hang         completions n_timeout       1
expect resetearly   completions n_connect_error 1
# an SSE comment every 0.5 s keeps the idle timer (5 s here) from ever firing:
# only the request deadline ends these
expect pingforever  chat        n_timeout       1 --idle-timeout 5s --request-timeout 1s
# content chunks that never end: cut at 4 x max_tokens + 256 = 288 chunks
expect forever      completions n_stream_error  1

# a run in which no request ended ok is stored as failed, whatever the
# failures were: an HTTP error is no measurement either
for m in 429 500 truncate hang; do
  check "$m: the run is stored as failed (got $(jq -r .run.status "$E2E_TMP/$m.json"))" \
    [ "$(jq -r .run.status "$E2E_TMP/$m.json")" = failed ]
done
check "normal: the run is stored as ok" [ "$(jq -r .run.status "$E2E_TMP/normal.json")" = ok ]

# a server timing far out of range is stored as unknown, and the run says so
expect llamahuge    chat        completed       0
check "llamahuge: predicted_ms 1e308 is not stored" \
  [ "$(jq '[.cells[0].requests[].server_decode_ms] | map(select(. != null and . > 0)) | length' "$E2E_TMP/llamahuge.json")" = 0 ]
check "llamahuge: the run's notes count what was dropped" \
  grep -q "4 server usage or timings values lay outside a plausible range" "$E2E_TMP/llamahuge.out"

# a server that drops kept-alive connections: every request after the first
# finds its reused connection closed and is retried on a fresh one; libcurl
# counted those retries over a handle's life and failed the sixth
run_mode keepdrop completions --requests 12 --concurrency 1; rc=$?
check "keepdrop: 12 of 12 ok over dropped keep-alive connections (exit $rc)" \
  [ "$(jq '[.cells[0].requests[] | select(.status == "ok")] | length' "$E2E_TMP/keepdrop.json")" = 12 ]

# the stored requests keep what went wrong
check "429: the status code is kept per request" \
  [ "$(jq '[.cells[0].requests[].http_status] | unique | .[0]' "$E2E_TMP/429.json")" = 429 ]
# drip feed: one byte per write still parses into 8 content chunks each
check "drip: every request counted 8 content chunks" \
  [ "$(jq '[.cells[0].requests[].n_chunks] | unique | .[0]' "$E2E_TMP/drip.json")" = 8 ]
# the ping-forever requests say which limit ended them
check "pingforever: each ended by its request timeout" \
  [ "$(jq '[.cells[0].requests[].error | test("request timeout 1000 ms")] | all' "$E2E_TMP/pingforever.json")" = true ]
check "pingforever: the chunk that came is kept" \
  [ "$(jq '[.cells[0].requests[].n_chunks] | unique | .[0]' "$E2E_TMP/pingforever.json")" = 1 ]
# the never-ending stream: bounded per request, and says why
check "forever: every request kept 288 chunks, no more" \
  [ "$(jq '[.cells[0].requests[].n_chunks] | unique | .[0]' "$E2E_TMP/forever.json")" = 288 ]
check "forever: the reason is \"server sent more than asked\"" \
  [ "$(jq '[.cells[0].requests[].error | test("server sent more than asked")] | all' "$E2E_TMP/forever.json")" = true ]
# a target that answers only with malformed streams is not said to have
# stopped answering: the message says what it sent
check "garbage: the failure names what the target sent" \
  grep -q "answered with errors.*4 stream_error; first (request 0): malformed event" "$E2E_TMP/garbage.out"
check "garbage: nothing claims it stopped answering" \
  bash -c "! grep -q 'stopped answering' '$E2E_TMP/garbage.out'"
check "hang: a silent target did stop answering" grep -q "stopped answering.*4 timeout" "$E2E_TMP/hang.out"
# the epoll_wait fallback (kernels before 5.11) runs the whole CLI too
CALIPER_PROBE_NO_PWAIT2=1 expect normal completions completed 0
CALIPER_PROBE_NO_PWAIT2=1 expect hang   completions n_timeout 1
finish
