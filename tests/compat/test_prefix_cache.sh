#!/usr/bin/env bash
# llama-server's prefix cache against the chat scenario (issue: TTFT
# against the tokens the server had to compute). llama-server reports what
# its cache served two ways, usage.prompt_tokens_details.cached_tokens and
# timings.cache_n: caliper stores each request's count, the turn table
# prints each turn's cache-hit share, and the TTFT line is fitted on the new
# (uncached) tokens, so it is a positive slope or "no per-token cost shown",
# never a negative one printed as a finding (it once read "TTFT grows
# -11,797 ms per 1000 prompt tokens"). The exact prompt lengths are checked
# against its own count, with its chat template's tokens measured once.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/lib.sh"
cd "$E2E_TMP"
M="$E2E_TMP/tiny.gguf"
"$CALIPER" serve --preset tiny --export-gguf "$M" 2>export.err && ok "tiny exported" \
  || { not_ok "export"; cat export.err; finish; }
# (tiny's context is 512 tokens: the prompts stay under it)
start_llama "$M" -c 2048 -np 4 || { not_ok "llama-server starts"; finish; }
CHAT=(--scenario chat --users 4 --turns 5 --system-tokens 200 --user-tokens 30 --max-tokens 8
      --think-time 0 --no-telemetry)
for api in completions chat; do
  "$CALIPER" run --url "$LLAMA_URL" --api $api "${CHAT[@]}" --db "$api.db" >"$api.out" 2>"$api.err"
  rc=$?
  check "$api: the chat scenario runs (exit $rc)" [ $rc -eq 0 ]
  sed -n '/^per turn/,$p' "$api.out" | sed 's/^/# /'
  grep -E "prompt lengths|adds" "$api.out" "$api.err" | sed 's/^/# /'
  check "$api: every ok request's cached tokens stored" \
    [ "$(sqlite3 "$api.db" "select count(*) from requests where status='ok' and cached_tokens is null")" = 0 ]
  check "$api: later turns served mostly from the cache (turn 5 over 50 %)" \
    sh -c "sed -n '/^per turn/,\$p' '$api.out' | awk '\$1 == 5 { exit !(\$5 > 50) }'"
  check "$api: the TTFT line is on the new tokens" grep -q 'new prompt tokens' "$api.out"
  check "$api: no negative slope printed as a finding" bash -c "! grep -qE 'grows -' '$api.out'"
  check "$api: the prompt lengths are confirmed by the server's own count" \
    grep -q 'exact by /tokenize, confirmed by the server.s own count' "$api.out"
done
check "chat: its template's tokens measured once with an empty message, and said" \
  grep -q "the server adds [0-9]* tokens\? to every prompt (its chat template: the server's own count of a request whose message is empty)" chat.err
finish
