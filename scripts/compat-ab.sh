#!/usr/bin/env bash
# The same-weights A/B table in docs/compat.md: one GGUF (preset P, default
# small), `caliper serve --model` as A and llama-server as B, both on
# THREADS threads, alternated shot by shot by `caliper run --ab`, then the
# paired ratios (tests/compat/ab_table.py). Needs `make compat` to have
# built llama.cpp once.
#   scripts/compat-ab.sh [PRESET] [SHOTS]      prints the Markdown table
set -euo pipefail
cd "$(dirname "$0")/.."
P=${1:-small}; SHOTS=${2:-8}; THREADS=${THREADS:-2}
BIN=$(bash scripts/compat-build.sh)
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
build/caliper serve --preset "$P" --export-gguf "$W/m.gguf" >&2
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
pa=$(port); pb=$(port)
set -x
build/caliper run --ab \
  --launch "build/caliper serve --model $W/m.gguf --port $pa --threads $THREADS" --url "http://127.0.0.1:$pa" \
  --launch "$BIN/llama-server -m $W/m.gguf --host 127.0.0.1 --port $pb -t $THREADS -tb $THREADS -c 4096 --no-webui" \
  --url "http://127.0.0.1:$pb" \
  --shots "$SHOTS" --warmup 1 --prompt-tokens 512 --max-tokens 64 --requests 4 --no-telemetry \
  --db "$W/ab.db" --json "$W/ab.json" >&2
set +x
python3 tests/compat/ab_table.py "$W/ab.json" "caliper serve" "llama-server"
