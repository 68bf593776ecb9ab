#!/usr/bin/env bash
# A /tokenize that never answers, or trickles its answer, while caliper
# prepares. Ctrl-C once waited for the call's whole deadline (caliper run
# exited 67 s after SIGINT, caliper proxy --tokenize was alive 12 s
# after); a 1-byte-a-second answer cost one deadline per call (132 s)
# before the run fell back; and both were reported as "connection failed".
# Now every call reads the stop flag while it waits, has a deadline on the
# whole call, ends the counting at its first timeout, and the note says
# what happened. The fault server prints a line when it holds the call, so
# each signal lands while the call waits; the 10 s bounds below only catch
# a process that waits out its deadline (30 s and more).
. "$(dirname "$0")/lib.sh"
T=$E2E_TMP
FS=${BUILD:-build}/tests/helpers/faultserver
[ -x "$FS" ] || { not_ok "helper $FS is built (make e2e builds it)"; finish; }
start_faultserver "$FS" || { not_ok "fault server started"; finish; }
FOUT=$E2E_TMP/fs.out
held() { grep -c "^tokenize $1" "$FOUT"; }
# wait_for N WHAT: until the fault server has said "tokenize WHAT" N times
wait_for() {
  local i; for i in $(seq 1 2400); do [ "$(held "$2")" -ge "$1" ] && return 0; sleep 0.05; done; return 1
}
# exit_within PID S: waits for PID to exit, at most S seconds; sets RC
exit_within() {
  local i; for i in $(seq 1 $(($2 * 20))); do kill -0 "$1" 2>/dev/null || break; sleep 0.05; done
  if kill -0 "$1" 2>/dev/null; then kill -KILL "$1" 2>/dev/null; wait "$1" 2>/dev/null; RC=timeout; return 1; fi
  wait "$1"; RC=$?; return 0
}
RUN=(--shots 2 --requests 2 --prompt-tokens 64 --max-tokens 8 --no-telemetry)

# 1. caliper run, Ctrl-C while /tokenize holds the call (its deadline 30 s)
n=$(held waits)
"$CALIPER" run --url "http://127.0.0.1:$PORT/tokhang" "${RUN[@]}" --db "$T/a.db" >"$T/a.out" 2>"$T/a.err" &
P=$!; E2E_PIDS+=("$P")
check "run: the fault server holds its /tokenize call" wait_for $((n + 1)) waits
kill -INT "$P"
if exit_within "$P" 10; then ok "run exits within 10 s of Ctrl-C during /tokenize"
else not_ok "run exits within 10 s of Ctrl-C during /tokenize (still running)"; fi
check "run: exit 130, interrupted (rc $RC)" [ "$RC" = 130 ]
check "run: says it is interrupted and stored" grep -q 'interrupted: run 1 is stored' "$T/a.err"
if grep -q 'tokenizer of' "$T/a.err"; then not_ok "run: no tokenizer failure is noted for a Ctrl-C"
else ok "run: no tokenizer failure is noted for a Ctrl-C"; fi

# 2. caliper proxy --tokenize, Ctrl-C while it counts a turn's tokens
"$CALIPER" proxy --listen 127.0.0.1:0 --upstream "http://127.0.0.1:$PORT/tokhang" --tokenize \
  >/dev/null 2>"$T/p.err" &
PX=$!; E2E_PIDS+=("$PX")
PURL=
for i in $(seq 1 2400); do
  PURL=$(grep -oE 'http://127\.0\.0\.1:[0-9]+' "$T/p.err" | head -1); [ -n "$PURL" ] && break; sleep 0.05
done
n=$(held waits)
curl -s -m 30 "$PURL/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"stream":true}' \
  >"$T/turn.sse"
check "proxy: the turn came through" grep -q 'data: \[DONE\]' "$T/turn.sse"
check "proxy: the fault server holds its /tokenize call" wait_for $((n + 1)) waits
kill -INT "$PX"
if exit_within "$PX" 10; then ok "proxy --tokenize exits within 10 s of Ctrl-C during /tokenize"
else not_ok "proxy --tokenize exits within 10 s of Ctrl-C during /tokenize (still running)"; fi
check "proxy: exit 0 (rc $RC)" [ "$RC" = 0 ]

# 3. A trickling answer (a byte a second) and a silent one, deadline 3 s
# (connect 1 s + idle 2 s): one call each, then approximate prompts, and
# the note names what happened. Two prompt lengths: the second asks no more.
for mode in tokdrip tokhang; do
  word=$([ $mode = tokdrip ] && echo drips || echo waits)
  n=$(held $word)
  "$CALIPER" run --url "http://127.0.0.1:$PORT/$mode" --shots 1 --requests 2 --prompt-tokens 64,96 \
    --max-tokens 8 --no-telemetry --connect-timeout 1s --idle-timeout 2s --db "$T/$mode.db" \
    >"$T/$mode.out" 2>"$T/$mode.err"
  rc=$?
  check "$mode: the run falls back and completes (rc $rc)" [ "$rc" -eq 0 ]
  calls=$(( $(held $word) - n ))
  check "$mode: one /tokenize call for two prompt lengths ($calls)" [ "$calls" -eq 1 ]
  grep 'tokenizer of' "$T/$mode.err"
  if [ $mode = tokdrip ]; then
    check "tokdrip: the note says the answer came too slowly" \
      grep -q 'failed (POST /tokenize timed out after 3 s: the answer came too slowly (HTTP 200, [0-9]* bytes of its body in 3 s))' "$T/$mode.err"
  else
    check "tokhang: the note says it timed out with no answer" \
      grep -q 'failed (POST /tokenize timed out after 3 s with no answer)' "$T/$mode.err"
  fi
  if grep -q 'connection failed' "$T/$mode.err"; then not_ok "$mode: not reported as a connection failure"
  else ok "$mode: not reported as a connection failure"; fi
done
finish
