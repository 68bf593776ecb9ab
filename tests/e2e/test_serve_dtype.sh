#!/usr/bin/env bash
# caliper serve --dtype: each weight format serves completions, names itself
# in the model id and the profile, and greedy text from the F32 model is
# mostly kept by F16 (the same weights rounded to 11 bits); a bad format is
# a usage error that names the flag.
. "$(dirname "$0")/lib.sh"

"$CALIPER" serve --dtype q2_k >/dev/null 2>"$E2E_TMP/err"; rc=$?
check "--dtype q2_k exits 2" [ "$rc" -eq 2 ]
check "--dtype q2_k names the flag and the value" grep -q -- '--dtype: "q2_k"' "$E2E_TMP/err"
"$CALIPER" serve --dtype q8_0 --dim 80 --heads 4 --kv-heads 2 >/dev/null 2>"$E2E_TMP/err"; rc=$?
check "q8_0 with dim 80 (not whole 32-weight blocks) exits 2" [ "$rc" -eq 2 ]
check "q8_0 with dim 80: the block rule named" \
  grep -q 'dim 80 is not a multiple of 32 (whole q8_0 blocks)' "$E2E_TMP/err"
"$CALIPER" serve --dtype q4_k --dim 96 --heads 4 --kv-heads 2 >/dev/null 2>"$E2E_TMP/err"; rc=$?
check "q4_k with dim 96 (not whole 256-weight super-blocks) exits 2" [ "$rc" -eq 2 ]
check "q4_k with dim 96: the block rule named" \
  grep -q 'dim 96 is not a multiple of 256 (whole q4_k blocks)' "$E2E_TMP/err"

BODY='{"model":"m","prompt":"The quick brown fox","max_tokens":12,"temperature":0}'
for dt in f32 f16 bf16 q8_0; do
  start_serve --preset tiny --dtype "$dt" --profile "$E2E_TMP/prof-$dt.json" \
    || { not_ok "serve --dtype $dt starts"; continue; }
  curl -sf --max-time 60 "$SERVE_URL/v1/completions" -H 'Content-Type: application/json' \
    -d "$BODY" -o "$E2E_TMP/out-$dt.json"
  check "$dt: a completion of 12 tokens" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["usage"]["completion_tokens"] == 12, r["usage"]
assert r["model"] == sys.argv[2], r["model"]
open(sys.argv[3], "w").write(r["choices"][0]["text"])
' "$E2E_TMP/out-$dt.json" "caliper-tiny$([ "$dt" = f32 ] || echo "-$dt")" "$E2E_TMP/text-$dt"
  kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
  check "$dt: the profile names the format" python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
assert p["model"]["dtype"] == sys.argv[2], p["model"]
assert any(b["batch"] == 1 and b["steps"] >= 11 for b in p["by_batch"]), p["by_batch"]
' "$E2E_TMP/prof-$dt.json" "$dt"
done
check "f16 greedy text starts like f32's" python3 -c '
import sys
a, b = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
assert len(a) > 0 and a[:4] == b[:4], (a, b)
' "$E2E_TMP/text-f32" "$E2E_TMP/text-f16"
finish
