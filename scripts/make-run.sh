#!/usr/bin/env bash
# `make run`: the main job on the built-in engine — a short shot series and a
# concurrency sweep against `caliper serve --preset small`, stored in
# caliper.db, printed with both throughput columns and the verdicts.
# Extra arguments go to `caliper run` (e.g. make run ARGS="--preset tiny").
set -uo pipefail
bin=${1:-build/caliper}
shift || true
"$bin" run --preset small --shots 4 --concurrency 1,4 --requests 4 \
  --prompt-tokens 128 --max-tokens 32 "$@"
rc=$?
if [ $rc -eq 0 ] || [ $rc -eq 1 ]; then
  echo
  echo "next: '$bin runs' lists stored runs; '$bin show latest' prints this one again;"
  echo "      '$bin export latest --json' writes it out (vLLM bench field names)."
fi
exit $rc
