#!/usr/bin/env bash
# caliper proxy in front of the built-in engine: a streamed chat turn with a
# system prompt, tools and history goes through with curl; the SSE reaches
# the client intact (same events as going direct, ending with [DONE]); the
# JSONL line counts the system, tools and history that were sent; TTFT fits
# inside the turn; the proxy's added latency on the first byte is printed;
# Ctrl-C prints the table; bad flags exit 2 naming flag and value.
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || { ok "# SKIP jq not available"; finish; }
jqe() { jq -e "$@" >/dev/null; }

start_serve --preset tiny || { not_ok "serve started"; finish; }
log=$E2E_TMP/turns.jsonl
"$CALIPER" proxy --listen 127.0.0.1:0 --upstream "$SERVE_URL" --log "$log" --tokenize \
  >"$E2E_TMP/proxy.out" 2>"$E2E_TMP/proxy.err" &
PX=$!; E2E_PIDS+=("$PX")
PURL=
for i in $(seq 1 100); do
  PURL=$(grep -oE 'http://127\.0\.0\.1:[0-9]+' "$E2E_TMP/proxy.err" | head -1)
  [ -n "$PURL" ] && break; sleep 0.05
done
check "proxy listening" [ -n "$PURL" ]

SYS="You are a careful assistant. Answer in one short sentence and cite no sources."
H1="What is the capital of France?"; H2="Paris is the capital of France."
NEW="And of Italy?"
TOOLS='[{"type":"function","function":{"name":"lookup_capital","description":"Look up the capital city of a country","parameters":{"type":"object","properties":{"country":{"type":"string"}},"required":["country"]}}}]'
body=$(jq -nc --arg s "$SYS" --arg h1 "$H1" --arg h2 "$H2" --arg n "$NEW" --argjson t "$TOOLS" \
  '{model:"caliper-tiny",stream:true,stream_options:{include_usage:true},max_tokens:32,temperature:0,
    messages:[{role:"system",content:$s},{role:"user",content:$h1},{role:"assistant",content:$h2},
              {role:"user",content:$n}],tools:$t}')
curl -sN "$PURL/v1/chat/completions" -H 'Content-Type: application/json' -d "$body" >"$E2E_TMP/via.sse"
curl -sN "$SERVE_URL/v1/chat/completions" -H 'Content-Type: application/json' -d "$body" >"$E2E_TMP/direct.sse"
check "SSE through the proxy ends with [DONE]" sh -c "grep -v '^\$' '$E2E_TMP/via.sse' | tail -1 | grep -qx 'data: \[DONE\]'"
nv=$(grep -c '^data: ' "$E2E_TMP/via.sse"); nd=$(grep -c '^data: ' "$E2E_TMP/direct.sse")
check "as many events as direct ($nv vs $nd)" [ "$nv" -eq "$nd" -a "$nv" -gt 2 ]
# greedy decoding on a fixed model: the generated text is the same both ways
txt() { grep '^data: {' "$1" | sed 's/^data: //' | jq -rj '.choices[0].delta.content // empty'; }
check "same generated text as direct" [ "$(txt "$E2E_TMP/via.sse")" = "$(txt "$E2E_TMP/direct.sse")" ]

for i in $(seq 1 100); do [ -s "$log" ] && break; sleep 0.05; done
cat "$log"
check "one JSONL line" [ "$(wc -l <"$log")" -eq 1 ]
line=$(head -1 "$log")
j() { echo "$line" | jqe "$@"; }
tools_chars=$(echo "$TOOLS" | jq -c . | tr -d '\n' | wc -m)
check "system chars = ${#SYS}" j ".prefix.system.chars == ${#SYS}"
check "tools chars = $tools_chars (the array, compact)" j ".prefix.tools.chars == $tools_chars"
check "history chars = ${#H1} + 1 + ${#H2}" j ".prefix.history.chars == $(( ${#H1} + 1 + ${#H2} ))"
check "new chars = ${#NEW}" j ".prefix.new.chars == ${#NEW}"
check "tokens counted by /tokenize, not estimated" \
  j '[.prefix[] | select(.chars > 0) | .estimated] | all(. == false)'
check "prefix tokens = sum of parts" j '.prefix_tokens == ([.prefix[].tokens] | add)'
check "TTFT <= turn time" j '.ttft_s > 0 and .ttft_s <= .turn_s'
check "decode inside the turn" j '.decode_s > 0 and .ttft_s + .decode_s <= .turn_s + 1e-6'
check "output tokens from usage" j '.output_tokens > 0 and .output_tokens_from == "usage"'
check "decode speed = output tokens / decode s" j '(.decode_tok_s * .decode_s / .output_tokens - 1 | fabs) < 1e-6'
check "stderr turn line" grep -qE '^turn 1: prefix [0-9]+ tok \(system [0-9]+, tools [0-9]+, history [0-9]+, new [0-9]+\), TTFT .* % of the turn, decode .* tok/s' "$E2E_TMP/proxy.err"
grep '^turn 1' "$E2E_TMP/proxy.err"

# other paths forwarded as-is
check "GET /v1/models forwarded" sh -c "curl -sf '$PURL/v1/models' | jq -e '.data[0].id == \"caliper-tiny\"' >/dev/null"
check "GET /metrics forwarded" sh -c "curl -sf '$PURL/metrics' | grep -q '^vllm:num_requests_running'"

# first-byte latency the proxy adds: median of 5 small non-turn GETs each way
fb() { for i in 1 2 3 4 5; do curl -s -o /dev/null -w '%{time_starttransfer}\n' "$1/health"; done | sort -n | sed -n 3p; }
d=$(fb "$SERVE_URL"); v=$(fb "$PURL")
echo "# first byte: direct $d s, through the proxy $v s"
check "the proxy adds under 50 ms to the first byte" awk -v d="$d" -v v="$v" 'BEGIN{exit !(v - d < 0.05)}'

# Ctrl-C: the table, exit 0
kill -INT $PX; wait $PX; rc=$?
check "Ctrl-C exits 0" [ "$rc" -eq 0 ]
check "summary table" grep -q 'median over 1 turns' "$E2E_TMP/proxy.out"
cat "$E2E_TMP/proxy.out"

bad() { local want=$1; shift; "$CALIPER" proxy "$@" >/dev/null 2>"$E2E_TMP/u.err"; local rc=$?
        if [ $rc -eq 2 ] && grep -qF -- "$want" "$E2E_TMP/u.err"; then ok "usage: $want"; else
        not_ok "usage: $want (rc $rc: $(cat "$E2E_TMP/u.err"))"; fi; }
bad '--upstream: missing' --listen 127.0.0.1:0
bad '--upstream: "localhost:8000"' --upstream localhost:8000
bad '--listen: "nowhere"' --upstream "$SERVE_URL" --listen nowhere
bad '--listen: "127.0.0.1:70000"' --upstream "$SERVE_URL" --listen 127.0.0.1:70000
bad '--max-body: "huge"' --upstream "$SERVE_URL" --max-body huge
bad '"extra": unexpected' --upstream "$SERVE_URL" extra
check "--help exits 0" sh -c "'$CALIPER' proxy --help >/dev/null"
finish
