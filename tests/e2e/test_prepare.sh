#!/usr/bin/env bash
# Preparing unique exact prompts costs a few /tokenize calls, not one or more
# per prompt: 384 prompts on the built-in engine take far fewer calls than
# prompts (the server counts them in caliper:tokenize_requests_total; the
# old workload made over 384 when nonce lines tokenise to different
# lengths, as they do here), and every prompt the server prefilled has the
# asked length (exactness kept: the server's usage count of each request).
. "$(dirname "$0")/lib.sh"
T=$E2E_TMP
need sqlite3 "reading the stored requests" || finish
start_serve --preset tiny --max-batch 64 || { not_ok "serve"; finish; }
tok() { curl -s "$SERVE_URL/metrics" | awk '/^caliper:tokenize_requests_total/ { print $2 }'; }
before=$(tok)
check "the server counts /tokenize calls" [ -n "$before" ]
"$CALIPER" run --url "$SERVE_URL" --prompt-tokens 100 --max-tokens 1 --concurrency 128 --requests 384 \
  --shots 1 --no-telemetry --seed 7 --db "$T/p.db" >"$T/out" 2>"$T/err"; rc=$?
check "run exits 0" [ "$rc" -eq 0 ] || cat "$T/err"
after=$(tok)
calls=$((after - before))
echo "# /tokenize calls for 384 prompts: $calls"
check "fewer /tokenize calls than half the prompts ($calls)" [ "$calls" -lt 192 ]
check "every request was stored" [ "$(sqlite3 "$T/p.db" "select count(*) from requests")" -eq 384 ]
check "every prompt has the asked 100 tokens (the server's count)" \
  [ "$(sqlite3 "$T/p.db" "select count(*) from requests where prompt_tokens = 100")" -eq 384 ]
check "the cell is exact" [ "$(sqlite3 "$T/p.db" "select prompt_exact from cells")" = 1 ]
check "the prompts are unique" \
  [ "$(sqlite3 "$T/p.db" "select unique_prompts from cells")" = 1 ]
if grep -q "every prompt is counted" "$T/err"; then not_ok "no fallback on the built-in engine"; else ok "no fallback on the built-in engine"; fi
finish
