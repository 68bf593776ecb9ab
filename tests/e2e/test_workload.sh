#!/usr/bin/env bash
# Prompt lengths on the built-in engine: a length below the unique nonce
# line every prompt starts with cannot be reached, so its cell is marked
# approximate and the run says the shortest exact length (it used to say
# "(unique, exact)" while the server counted 7-9 tokens); lengths above it
# stay exact.
. "$(dirname "$0")/lib.sh"
T=$E2E_TMP

"$CALIPER" run --preset tiny --prompt-tokens 1,32 --max-tokens 2 --requests 3 --shots 1 --no-telemetry \
  --db "$T/w.db" >"$T/out" 2>"$T/err"; rc=$?
check "run exits 0" [ "$rc" -eq 0 ]
if grep -qE -- '--prompt-tokens 1 is shorter than the unique nonce line .* the shortest exact length is [0-9]+' "$T/err"
then ok "the shortest exact length is said"; else not_ok "no shortest exact length"; cat "$T/err"; fi
shortest=$(grep -oE 'shortest exact length is [0-9]+' "$T/err" | grep -oE '[0-9]+$')
check "shortest exact length > 1" [ "${shortest:-0}" -gt 1 ]
"$CALIPER" export 1 --csv --db "$T/w.db" >"$T/cells.csv" || not_ok "export"
# columns by name: prompt_tokens, prompt_exact
col() { head -1 "$T/cells.csv" | tr ',' '\n' | grep -nx "$1" | cut -d: -f1; }
pt=$(col prompt_tokens); pe=$(col prompt_exact)
exact_of() { awk -F, -v pt="$pt" -v pe="$pe" -v n="$1" 'NR > 1 && $pt == n { print $pe }' "$T/cells.csv"; }
check "prompt 1: marked approximate" [ "$(exact_of 1)" = 0 ]
check "prompt 32: exact" [ "$(exact_of 32)" = 1 ]
grep -q 'approximate' "$T/out" && ok "the report notes approximate lengths" || not_ok "no approximate note"
finish
