#!/usr/bin/env bash
# `make fuzz` bounds every target's run in time per input and in memory
# (libFuzzer's -timeout, -rss_limit_mb and -malloc_limit_mb), so a quadratic
# path or a huge reservation fails the fuzz run instead of passing slowly;
# the rule is one loop over tests/fuzz/fuzz_*.c, so a target added there
# gets the bounds without touching it. make test replays every target's
# corpus (tests/fuzz/corpus/NAME): each has one.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
rule=$(sed -n '/^fuzz:/,/^$/p' "$ROOT/Makefile")
run=$(printf '%s\n' "$rule" | grep -A2 -- '-max_total_time=')
for flag in '-timeout=$(FUZZ_TIMEOUT)' '-rss_limit_mb=$(FUZZ_RSS_MB)' '-malloc_limit_mb=$(FUZZ_RSS_MB)'; do
  check "the fuzz rule runs every target with $flag" grep -qF -- "$flag" <<<"$run"
done
check "the bounds have defaults (FUZZ_TIMEOUT, FUZZ_RSS_MB)" \
  sh -c "grep -qE '^FUZZ_TIMEOUT \?= [0-9]+' '$ROOT/Makefile' && grep -qE '^FUZZ_RSS_MB +\?= [0-9]+' '$ROOT/Makefile'"
check "the rule loops over every fuzz source" grep -qF 'for f in $(FUZZ_SRC)' <<<"$rule"
missing=
for f in "$ROOT"/tests/fuzz/fuzz_*.c; do
  n=$(basename "$f" .c)
  [ -n "$(ls -A "$ROOT/tests/fuzz/corpus/$n" 2>/dev/null)" ] || missing="$missing $n"
done
check "every fuzz target has a corpus for make test to replay (missing:${missing:- none})" \
  [ -z "$missing" ]
check "the /tokenize answer reader has its target" [ -f "$ROOT/tests/fuzz/fuzz_tokenize_answer.c" ]
finish
