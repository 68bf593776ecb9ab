#!/usr/bin/env bash
# An exact prompt length is one the server's own count confirms. Against
# tests/helpers/tokfront, whose /tokenize lies on purpose (doubles its
# counts, is off by one, or gives a tokens array 3 short) while its usage
# counts the truth, `run --prompt-tokens 64,256` never stores a cell
# `exact`: each is stored approximate at the server's count, the verdict
# names the disagreement, and the prefill fit and compare use the server's
# count. An honest front is confirmed; a server that adds a BOS or a chat
# template is confirmed with that offset measured once and said; one that
# reports no usage is "exact by /tokenize, not confirmed by the server".
. "$(dirname "$0")/lib.sh"
T=$E2E_TMP
need sqlite3 "reading the stored cells" || finish
start_faultserver "$BUILD/tests/helpers/tokfront" || { not_ok "tokfront starts"; finish; }
U=http://127.0.0.1:$PORT
RUN=(--prompt-tokens 64,256 --requests 8 --shots 1 --max-tokens 4 --no-telemetry)
q() { sqlite3 "$T/$1.db" "$2"; }

# honest: confirmed, no offset
"$CALIPER" run --url "$U/honest" "${RUN[@]}" --db "$T/honest.db" >"$T/honest.out" 2>&1
check "honest /tokenize: both cells exact and confirmed" \
  [ "$(q honest "select group_concat(prompt_tokens || ':' || prompt_exact || ':' || prompt_basis) from cells")" = "64:1:confirmed,256:1:confirmed" ]
check "... the verdict says the server confirmed it" \
  grep -q 'prompt lengths (64, 256 tok): exact by /tokenize, confirmed by the server.s own count (usage.prompt_tokens) in 16 of 16 requests' "$T/honest.out"

# liars: never exact; the server's count is the length
liar() {   # MODE SERVER64 SERVER256
  "$CALIPER" run --url "$U/$1" "${RUN[@]}" --db "$T/$1.db" >"$T/$1.out" 2>&1
  check "$1: no cell stored exact" [ "$(q "$1" "select count(*) from cells where prompt_exact = 1")" = 0 ]
  check "$1: stored at the server's counts ($2, $3), with what /tokenize said (64, 256)" \
    [ "$(q "$1" "select group_concat(prompt_tokens || '/' || prompt_asked || ':' || prompt_basis) from cells")" = "$2/64:server,$3/256:server" ]
  check "$1: the verdict names the disagreement" \
    grep -q "c1 · $2 tok prose: prompt length: the server counted $2 where /tokenize said 64: 8 of 8 requests" "$T/$1.out"
  grep "server counted $2 where" "$T/$1.out" | head -1 | sed 's/^/# /'
}
liar double 32 128
liar plus1 63 255
liar short3 67 259
# the prefill fit reads the server's lengths (a third length: it needs 3)
"$CALIPER" run --url "$U/double" --prompt-tokens 64,128,256 --requests 4 --shots 1 --max-tokens 4 \
  --no-telemetry --db "$T/fit.db" >/dev/null 2>&1
"$CALIPER" fit prefill 1 --db "$T/fit.db" --json >"$T/fit.json" 2>&1
check "fit prefill reads the server's lengths: 32, 64, 128 where /tokenize said 64, 128, 256" \
  python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["fits"][0]["points"]; sys.exit(not sorted(x for x, _ in p) == [32, 64, 128])' "$T/fit.json"
# compare reads the server's count: the doubling front's cells are 32 and
# 128 tokens, not the honest run's 64 and 256
"$CALIPER" export 1 --json --db "$T/honest.db" >"$T/h.json"
"$CALIPER" export 1 --json --db "$T/double.db" >"$T/d.json"
"$CALIPER" compare "$T/h.json" "$T/d.json" >"$T/cmp.out" 2>&1
check "compare: the lying run's cells are its server's lengths (64 tok vs 32 tok)" \
  grep -q 'not comparable: prompt length 64 tok vs 32 tok' "$T/cmp.out"

# a BOS the server adds: measured once with add_special, said, taken off
"$CALIPER" run --url "$U/bos" "${RUN[@]}" --db "$T/bos.db" >"$T/bos.out" 2>&1
check "a server adding a BOS: confirmed, the offset stored (1)" \
  [ "$(q bos "select group_concat(prompt_basis || ':' || prompt_offset) from cells")" = "confirmed:1,confirmed:1" ]
check "... and said" grep -q 'it adds 1 token to every prompt (special tokens such as a BOS), measured once' "$T/bos.out"

# no usage: exact by /tokenize alone, and said so
"$CALIPER" run --url "$U/nousage" "${RUN[@]}" --db "$T/nousage.db" >"$T/nousage.out" 2>&1
check "no usage: exact, unconfirmed" \
  [ "$(q nousage "select group_concat(prompt_exact || ':' || prompt_basis) from cells")" = "1:unconfirmed,1:unconfirmed" ]
check "... the verdict: exact by /tokenize, not confirmed by the server" \
  grep -q 'exact by /tokenize, not confirmed by the server: it reported no usable usage.prompt_tokens (none, or not a plausible count) in 16 requests' "$T/nousage.out"

# chat: the template's tokens measured once (an empty message) and said
CHAT=(--api chat --prompt-tokens 64 --requests 4 --shots 1 --max-tokens 4 --no-telemetry)
"$CALIPER" run --url "$U/honest" "${CHAT[@]}" --db "$T/chat.db" >"$T/chat.out" 2>&1
check "chat: confirmed with the template's 7 tokens" \
  [ "$(q chat "select prompt_basis || ':' || prompt_offset from cells")" = "confirmed:7" ]
check "... measured with an empty message and said" \
  grep -q 'the server adds 7 tokens to every prompt (its chat template: the server.s own count of a request whose message is empty)' "$T/chat.out"
"$CALIPER" run --url "$U/noempty" "${CHAT[@]}" --db "$T/noempty.db" >"$T/noempty.out" 2>&1
check "chat, an empty message refused: the offset from the first cell, said to be that" \
  sh -c "[ \"\$(sqlite3 '$T/noempty.db' 'select prompt_basis || \":\" || prompt_offset from cells')\" = confirmed:7 ] &&
         grep -q 'taken from the first checked cell' '$T/noempty.out'"
"$CALIPER" run --url "$U/short3" "${CHAT[@]}" --db "$T/chatlie.db" >"$T/chatlie.out" 2>&1
check "chat through a lying /tokenize: the server's 67 where it said 64" \
  grep -q 'the server counted 67 (its 74 less the 7 it adds to every prompt) where /tokenize said 64: 4 of 4 requests' "$T/chatlie.out"

# hostile usage: a negative, a huge, a fractional or a string count is no
# count: the cell stays exact by /tokenize alone, said so, never "confirmed"
# and never stored at the hostile count
for m in neg huge frac string; do
  "$CALIPER" run --url "$U/$m" --prompt-tokens 64 --requests 4 --shots 1 --max-tokens 4 \
    --no-telemetry --db "$T/h$m.db" >"$T/h$m.out" 2>&1
  check "usage.prompt_tokens $m: unconfirmed, its requests' counts unknown" \
    [ "$(q "h$m" "select prompt_basis || ':' || prompt_tokens || ':' || (select count(*) from requests where prompt_tokens is not null) from cells")" = "unconfirmed:64:0" ]
done
check "... the implausible ones counted and said" grep -q 'server usage or timings values lay outside a plausible range' "$T/hneg.out"

# export and show carry the basis
"$CALIPER" export 1 --json --db "$T/double.db" >"$T/double.json"
check "export carries prompt_basis, prompt_asked" \
  python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["cells"][0]; sys.exit(not (c["prompt_basis"]=="server" and c["prompt_asked"]==64 and c["prompt_tokens"]==32))' "$T/double.json"
finish
