#!/usr/bin/env bash
# TTFT against the tokens the server had to compute. A chat scenario and a
# replay against tests/helpers/tokfront, a front with a prefix cache whose
# prefill costs only what it did not cache: each request's cached tokens
# are stored (usage.prompt_tokens_details.cached_tokens, llama.cpp's
# timings.cache_n), show, report and the turn table print the cache-hit
# share per turn, and the TTFT line is fitted on the new (uncached) tokens.
# A server with the same cache that reports nothing gets "cannot fit"; the
# built-in engine (no prefix cache) a line on the whole prompt. A negative
# slope is never printed as a finding, whatever the machine's load.
. "$(dirname "$0")/lib.sh"
T=$E2E_TMP
need sqlite3 "reading the stored requests" || finish
start_faultserver "$BUILD/tests/helpers/tokfront" || { not_ok "tokfront starts"; finish; }
U=http://127.0.0.1:$PORT
CHAT=(--scenario chat --users 3 --turns 5 --system-tokens 300 --user-tokens 40 --max-tokens 4
      --think-time 0 --no-telemetry)
turns() { sed -n '/^per turn/,$p' "$1"; }
no_negative() { ! grep -qE 'TTFT grows -|grows -[0-9]' "$1"; }

for m in cache cachellama; do
  "$CALIPER" run --url "$U/$m" "${CHAT[@]}" --db "$T/$m.db" >"$T/$m.out" 2>&1
  check "$m: every request's cached tokens stored" \
    [ "$(sqlite3 "$T/$m.db" "select count(*) from requests where status='ok' and cached_tokens is null")" = 0 ]
  check "$m: the first user's first turn had nothing cached, later turns most" \
    [ "$(sqlite3 "$T/$m.db" "select min(cached_tokens) = 0 and max(cached_tokens) > 300 from requests")" = 1 ]
  check "$m: the turn table prints the cache-hit share per turn" \
    sh -c "sed -n '/^per turn/,\$p' '$T/$m.out' | grep -qE '^ +5 +[0-9]+ +[0-9]+ +[0-9.]+ +9[0-9]\.[0-9]'"
  check "$m: the TTFT line is on the new tokens" grep -q 'new prompt tokens (each prompt less the tokens the server.s cache served' "$T/$m.out"
  check "$m: no negative slope printed as a finding" no_negative "$T/$m.out"
  turns "$T/$m.out" | tail -2 | sed 's/^/# /'
done
# show and report say the same, from the store
"$CALIPER" show 1 --db "$T/cache.db" >"$T/show.out" 2>&1
check "show prints the cached share per turn" grep -qE '^ turn +prompt +shared +shared +cached' "$T/show.out"
"$CALIPER" report 1 --db "$T/cache.db" --format md -o "$T/r.md" >/dev/null 2>&1
"$CALIPER" report 1 --db "$T/cache.db" -o "$T/r.html" >/dev/null 2>&1
check "the HTML report's turn table has the cached share" grep -q '<th>cached %</th>' "$T/r.html"

# the same cache, its hits reported nowhere: no line at all
"$CALIPER" run --url "$U/cachequiet" "${CHAT[@]}" --db "$T/quiet.db" >"$T/quiet.out" 2>&1
check "a cache that reports nothing: cannot fit" \
  grep -q 'cannot fit TTFT per prompt token: the prefix cache may have served part of each prompt' "$T/quiet.out"
check "... its cached column is — for every turn" \
  [ "$(turns "$T/quiet.out" | grep -cE '^ +[1-5] +[0-9]+ +[0-9]+ +[0-9.]+ +— ')" = 5 ]

# the built-in engine has no prefix cache: a line on the whole prompt, or
# no cost shown where the load hides it; never negative
"$CALIPER" run --preset tiny "${CHAT[@]}" --db "$T/builtin.db" >"$T/builtin.out" 2>&1
check "the built-in engine: the line is on the whole prompt (it has no prefix cache)" \
  grep -q 'prompt tokens (the built-in engine has no prefix cache' "$T/builtin.out"
check "... no negative slope printed as a finding" no_negative "$T/builtin.out"

# hostile cache counts: negative, or more than the prompt, are unknown
for m in cachedneg cachedbig; do
  "$CALIPER" run --url "$U/$m" "${CHAT[@]}" --db "$T/$m.db" >"$T/$m.out" 2>&1
  check "$m: no cached count stored beyond its prompt or below 0" \
    [ "$(sqlite3 "$T/$m.db" "select count(*) from requests where cached_tokens < 0 or cached_tokens > prompt_tokens")" = 0 ]
  check "$m: and no line fitted on counts it could not have" grep -q 'cannot fit TTFT per prompt token' "$T/$m.out"
done
check "more cached than the prompt: said so" grep -q 'requests reported more cached tokens than their prompt' "$T/cachedbig.out"

# a replay of a captured session through the same cache
python3 - "$T/session.jsonl" <<'PY'
import json, sys
w = 1_700_000_000_000_000_000
with open(sys.argv[1], "w") as f:
    for k in range(4):
        f.write(json.dumps({"wall_ns": w + k * 50_000_000, "status": 200, "output_tokens": 4,
                            "turn_s": 0.01, "prefix": {"system": {"tokens": 300},
                            "history": {"tokens": 60 * k}, "new": {"tokens": 40}}}) + "\n")
PY
"$CALIPER" run --url "$U/cache" --replay "$T/session.jsonl" --replay-speed 10 --shots 1 \
  --no-telemetry --db "$T/replay.db" >"$T/replay.out" 2>&1
check "replay: cached tokens stored for its turns" \
  [ "$(sqlite3 "$T/replay.db" "select count(*) from requests where cached_tokens > 0")" -ge 3 ]
check "replay: the turn table has the cached share" sh -c "sed -n '/^per turn/,\$p' '$T/replay.out' | grep -q cached"
check "replay: no negative slope printed as a finding" no_negative "$T/replay.out"
finish
