# caliper against a real llama-server on a GGUF caliper wrote (preset small):
# completions and chat, streamed and not, with usage and timings; exact
# prompt lengths through its /tokenize; client decode speed within 2 % of
# the server's own accounting; the unique-prompt nonce keeps its prompt
# cache from serving a prompt and --allow-prefix-cache shows the hit; watch
# on its /metrics; its 400 on context overflow kept as http_error with the
# message; --launch and --cold starting it.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/lib.sh"
cd "$E2E_TMP"
M="$E2E_TMP/small.gguf"
"$CALIPER" serve --preset small --export-gguf "$M" 2>export.err && ok "small exported" \
  || { not_ok "export"; cat export.err; finish; }
start_llama "$M" -c 4096 -np 2 --metrics || { not_ok "llama-server starts"; finish; }
ok "llama-server serves caliper's small preset"

jq_() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# run NAME ARGS...: caliper run against llama-server, JSON kept as NAME.json
run() {
  local name=$1; shift
  "$CALIPER" run --url "$LLAMA_URL" --db "$E2E_TMP/c.db" --json "$name.json" --label "$name" \
    --no-telemetry "$@" >"$name.out" 2>"$name.err"
}

for api in completions chat; do
  for mode in stream nostream; do
    body=(); [ $mode = nostream ] && body=(--body '{"stream": false, "stream_options": null}')
    n="$api-$mode"
    run "$n" --api $api --prompt-tokens 100 --max-tokens 32 --requests 3 "${body[@]}"
    rc=$?
    [ $rc -eq 0 ] && ok "$n: 3 requests ok" || { not_ok "$n: exit $rc"; tail -5 "$n.out" "$n.err"; continue; }
    v=$(jq_ "$n.json" "sorted(set((r['prompt_tokens'], r['output_tokens'], r['token_source']) for r in d['cells'][0]['requests']))")
    if [ $api = completions ]; then
      [ "$v" = "[(100, 32, 'usage')]" ] && ok "$n: prompt exactly 100 tokens (its /tokenize), 32 out, from usage" \
        || not_ok "$n: prompt/output tokens $v"
    else
      echo "$v" | grep -q ", 32, 'usage')" && ok "$n: 32 tokens out, counted from usage ($v)" || not_ok "$n: $v"
    fi
    s=$(jq_ "$n.json" "d['cells'][0]['server_decode_tps_median']")
    [ "$s" != None ] && ok "$n: the server's timings read ($s tok/s)" || not_ok "$n: no timings"
  done
done

# decode speed: client vs the server's own accounting, one request at a time
run speed --prompt-tokens 64 --max-tokens 128 --requests 4
r=$(jq_ speed.json "d['cells'][0]['decode_tps_median'] / d['cells'][0]['server_decode_tps_median']")
python3 -c "import sys; sys.exit(0 if abs(float(sys.argv[1]) - 1) <= 0.02 else 1)" "$r" \
  && ok "client decode speed within 2 % of the server's (ratio $r)" || not_ok "decode ratio $r"

# prompt cache: the server counts the prompt tokens it evaluates
ptok() { curl -s "$LLAMA_URL/metrics" | awk '/^llamacpp:prompt_tokens_total/ {print int($2)}'; }
p0=$(ptok); run nonce --prompt-tokens 200 --max-tokens 4 --requests 6 --concurrency 1; p1=$(ptok)
run cached --prompt-tokens 200 --max-tokens 4 --requests 6 --concurrency 1 --allow-prefix-cache; p2=$(ptok)
d1=$((p1 - p0)); d2=$((p2 - p1))
# a nonce's first letters may match the previous one's by chance (byte
# tokens: 1 in 26 per letter); nothing else of a prompt is ever reused
[ "$d1" -ge $((6 * 200 - 6 * 3)) ] && ok "nonce: the server evaluated $d1 of 1200 prompt tokens (its cache found nothing to reuse)" \
  || not_ok "nonce: only $d1 of 1200 prompt tokens evaluated"
[ "$d2" -le $((200 + 5 * 20)) ] && ok "--allow-prefix-cache: the server evaluated $d2 of 1200 (cache hits)" \
  || not_ok "--allow-prefix-cache: $d2 of 1200 evaluated, no hit"

# watch on its /metrics while a run keeps two requests going
run load --prompt-tokens 64 --max-tokens 96 --requests 8 --concurrency 2 &
lp=$!
# the watch starts once the server is busy (a readiness wait, not a guess at
# how long the run takes to prepare); the run's six shots outlast its 3 s
for i in $(seq 1 1200); do
  curl -s "$LLAMA_URL/metrics" | grep -qE '^llamacpp:requests_processing [1-9]' && break
  kill -0 $lp 2>/dev/null || break
  sleep 0.1
done
"$CALIPER" watch "$LLAMA_URL" --interval 200ms --duration 3s --json watch.json >watch.out 2>&1
wait $lp
grep -q 'llamacpp:requests_processing' watch.out watch.json && ok "watch finds llamacpp:requests_processing" \
  || { not_ok "watch gauge"; cat watch.out; }
grep -qE '"p50": [12]' watch.json && ok "watch sees requests running" || { not_ok "watch saw none"; head -c 600 watch.json; }
stop_llama

# context overflow: its 400, classified, the message kept
start_llama "$M" -c 128 -np 1 || { not_ok "llama-server -c 128"; finish; }
run overflow --prompt-tokens 400 --max-tokens 8 --requests 2
v=$(jq_ overflow.json "[(r['status'], r['http_status'], r['error']) for r in d['cells'][0]['requests']][0]")
echo "$v" | grep -q "('http_error', 400, '.*context" && ok "context overflow: http_error 400 with its message ($v)" \
  || not_ok "context overflow: $v"
stop_llama

# --launch and --cold: caliper starts llama-server for every shot
port=$(free_port)
"$CALIPER" run --launch "$LLAMA_BIN/llama-server -m $M --host 127.0.0.1 --port $port -t 2 -c 2048 --no-webui" \
  --port "$port" --cold --shots 2 --prompt-tokens 64 --max-tokens 16 --requests 2 --no-telemetry \
  --db "$E2E_TMP/c.db" --json cold.json >cold.out 2>cold.err
rc=$?
[ $rc -eq 0 ] && ok "--launch llama-server --cold --shots 2: exit 0" || { not_ok "--launch --cold: exit $rc"; tail -5 cold.out cold.err; }
k=$(jq_ cold.json "[c['shot_kind'] for c in d['cells']]")
[ "$k" = "['cold', 'cold']" ] && ok "both shots cold (a fresh llama-server each)" || not_ok "shot kinds $k"
pgrep -f "port $port" >/dev/null && not_ok "llama-server left running" || ok "llama-server stopped after the run"
finish
