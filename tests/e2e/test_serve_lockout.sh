#!/usr/bin/env bash
# caliper serve stays reachable under slow, silent and non-reading clients.
# 1,100 silent sockets, or 1,030 sending one header line every 2 s, once
# held every slot (libmicrohttpd's timeout counts silence only) and /health
# timed out; 16 clients that asked for a long stream and never read it held
# --max-connections 16. Now the request head and body have deadlines that
# activity does not extend, a reply has a send deadline (--send-timeout),
# and the connection that has gone longest without progress is closed when
# slots run short.
# Closes are detected by the sockets reading end-of-file (the helper waits
# for them); the bounds below only catch a server that never closes them.
. "$(dirname "$0")/lib.sh"
SLOW=${BUILD:-build}/tests/helpers/slowclients
[ -x "$SLOW" ] || { not_ok "helper $SLOW is built (make e2e builds it)"; finish; }
need curl "asking /health during the flood" || finish
# both ends of every socket: the helper's and the server's (each raises its
# own soft limit to the hard one); the hard limit must hold the largest set
ulimit -n "$(ulimit -Hn)" 2>/dev/null
if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt 2300 ]; then
  if [ "${CI:-}" = true ]; then not_ok "descriptor limit $(ulimit -Hn) is under the 2,300 this needs"
  else echo "skip - descriptor limit $(ulimit -Hn) is under the 2,300 this needs"; fi
  finish
fi

# slow_start OUT ARGS...: the helper in the background; waits for "ready"
slow_start() {
  local out=$1 i; shift
  : >"$out"
  "$SLOW" "$@" >"$out" 2>&1 &
  SLOW_PID=$!; E2E_PIDS+=("$SLOW_PID")
  for i in $(seq 1 2400); do
    grep -q '^ready' "$out" && return 0
    kill -0 "$SLOW_PID" 2>/dev/null || break
    sleep 0.05
  done
  cat "$out"; return 1
}
# lived KIND OUT: the shortest life of KIND's sockets, from the helper's line
lived() { sed -n "s/^$1 [0-9]* closed of [0-9]*, lived \([0-9.]*\) to .*/\1/p" "$2"; }

# 1. The flood of the report against the default limit (1,024 slots).
start_serve --preset tiny --header-timeout 2s || { not_ok "serve started"; finish; }
PORT=${SERVE_URL##*:}
out=$E2E_TMP/flood.out
check "1,100 silent and 1,030 trickling sockets connected" \
  slow_start "$out" "$PORT" 1100 1030 0 500 60
res=$(curl -s -m 10 -o "$E2E_TMP/health.json" -w '%{http_code} %{time_total}' "$SERVE_URL/health")
echo "# /health answered in ${res#* } s (HTTP ${res%% *}) with the flood connected"
check "/health answers during the flood" grep -q '"status":"ok"' "$E2E_TMP/health.json"
wait "$SLOW_PID"; rc=$?
cat "$out"
check "the server closed every silent and trickling socket" [ "$rc" -eq 0 ]
res=$(curl -s -m 10 -o "$E2E_TMP/health.json" -w '%{http_code}' "$SERVE_URL/health")
check "/health answers after the flood" [ "$res" = 200 ]

# 2. The deadlines themselves, below the slot limit (pacing mode: 8,192 slots,
# so nothing is closed to free one): trickling heads and bodies, a line or a
# byte every 250 ms, are closed once the deadline passes, never before it;
# a paced stream three times longer than both deadlines is not cut.
T=1
start_serve --preset tiny --pace-ms 100 --header-timeout ${T}s --body-timeout ${T}s \
  || { not_ok "paced serve started"; finish; }
PORT=${SERVE_URL##*:}
out=$E2E_TMP/deadline.out
check "200 trickling heads and 50 trickling bodies connected" \
  slow_start "$out" "$PORT" 0 200 50 250 60
curl -sN -m 60 "$SERVE_URL/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt":"hi","max_tokens":30,"stream":true}' >"$E2E_TMP/stream.sse"
wait "$SLOW_PID"; rc=$?
cat "$out"
check "every trickling socket was closed" [ "$rc" -eq 0 ]
lh=$(lived trickle "$out"); lb=$(lived body "$out")
check "no trickling head closed before the ${T} s deadline (shortest $lh s)" \
  awk -v l="$lh" -v t="$T" 'BEGIN{exit !(l != "" && l >= 0.9 * t)}'
check "no trickling body closed before the ${T} s deadline (shortest $lb s)" \
  awk -v l="$lb" -v t="$T" 'BEGIN{exit !(l != "" && l >= 0.9 * t)}'
n=$(grep -c '^data: {' "$E2E_TMP/stream.sse")
check "a 3 s stream outlives both deadlines ($n events, [DONE])" \
  sh -c "[ $n -ge 30 ] && grep -qx 'data: \[DONE\]' '$E2E_TMP/stream.sse'"

# 3. Readers that never read. Each asks for a 4,000-token stream (about
# 800 KB: more than the connection's send buffer holds) and reads nothing;
# the helper says "ready" once every reader's receive queue is full and
# still, so the server holds bytes it cannot send. The guard once knew only
# connections waiting for their request: with every slot a stalled reply,
# /health was closed as it came. The send deadline is 2 minutes here, so
# what lets /health in is the eviction of the reply whose client has taken
# nothing for the longest time.
STREAM='{"prompt":"hi","max_tokens":4000,"stream":true,"ignore_eos":true}'
start_serve --preset tiny --context 4096 --pace-ms 1 --max-connections 16 --send-timeout 120s \
  || { not_ok "serve --max-connections 16 started"; finish; }
PORT=${SERVE_URL##*:}
out=$E2E_TMP/readers.out
check "16 readers that never read are stalled" \
  slow_start "$out" "$PORT" 0 0 0 500 200 16 /v1/completions "$STREAM"
for r in 1 2 3; do
  res=$(curl -s -m 2 -o "$E2E_TMP/health.json" -w '%{http_code} %{time_total}' "$SERVE_URL/health")
  echo "# /health answered in ${res#* } s (HTTP ${res%% *}) with 16 stalled readers, try $r"
  check "/health answers within 2 s while 16 readers stall at --max-connections 16 (try $r)" \
    grep -q '"status":"ok"' "$E2E_TMP/health.json"
  rm -f "$E2E_TMP/health.json"
done
kill "$SLOW_PID" "$SERVE_PID" 2>/dev/null; wait "$SLOW_PID" "$SERVE_PID" 2>/dev/null

# 4. The send deadline itself, below the slot limit: 16 stalled readers are
# reset once they have taken nothing for 1 s; a client reading 50 KB/s is
# never cut however long its stream, and neither is one waiting 1.5 s for
# each token (waiting for the engine is not the client's fault).
start_serve --preset tiny --context 4096 --pace-ms 1 --send-timeout 1s \
  || { not_ok "serve --send-timeout 1s started"; finish; }
PORT=${SERVE_URL##*:}
out=$E2E_TMP/readers2.out
check "16 readers that never read are stalled (--send-timeout 1s)" \
  slow_start "$out" "$PORT" 0 0 0 500 60 16 /v1/completions "$STREAM"
wait "$SLOW_PID"; rc=$?
cat "$out"
check "the server reset every stalled reader" [ "$rc" -eq 0 ]
curl -sN -m 120 --limit-rate 50k "$SERVE_URL/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt":"hi","max_tokens":1000,"stream":true,"ignore_eos":true}' >"$E2E_TMP/slowread.sse"
n=$(grep -c '^data: {' "$E2E_TMP/slowread.sse")
check "a client reading 50 KB/s gets all of a 1,000-token stream ($n events, [DONE])" \
  sh -c "[ $n -ge 1000 ] && grep -qx 'data: \[DONE\]' '$E2E_TMP/slowread.sse'"
kill "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null
start_serve --preset tiny --pace-ms 1500 --send-timeout 1s \
  || { not_ok "serve --pace-ms 1500 started"; finish; }
curl -sN -m 60 "$SERVE_URL/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt":"hi","max_tokens":2,"stream":true}' >"$E2E_TMP/waits.sse"
n=$(grep -c '^data: {' "$E2E_TMP/waits.sse")
check "a stream 1.5 s between tokens outlives a 1 s send deadline ($n events, [DONE])" \
  sh -c "[ $n -ge 2 ] && grep -qx 'data: \[DONE\]' '$E2E_TMP/waits.sse'"
res=$(curl -s -m 60 "$SERVE_URL/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt":"hi","max_tokens":2}')
check "a non-streamed answer 3 s in the making outlives it too" \
  sh -c "printf '%s' '$res' | grep -q '\"finish_reason\"'"

bad() { local want=$1; shift; "$CALIPER" serve "$@" >/dev/null 2>"$E2E_TMP/u.err"; local rc=$?
        if [ $rc -eq 2 ] && grep -qF -- "$want" "$E2E_TMP/u.err"; then ok "usage: $want"; else
        not_ok "usage: $want (rc $rc: $(cat "$E2E_TMP/u.err"))"; fi; }
bad '--header-timeout: "0"' --header-timeout 0
bad '--body-timeout: "soon"' --body-timeout soon
bad '--send-timeout: "0"' --send-timeout 0
finish
