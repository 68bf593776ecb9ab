#!/usr/bin/env bash
# `make run`: the main job on the built-in engine — a short shot series and a
# concurrency sweep against `caliper serve --preset small`, stored in caliper.db.
set -euo pipefail
bin=${1:-build/caliper}
exec "$bin" run --shots 4 --concurrency 1,4 --requests 8 --prompt-tokens 256 --max-tokens 32
