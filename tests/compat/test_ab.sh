# The same weights in two engines, side by side: `caliper run --ab` with
# `caliper serve --model m.gguf` as A and `llama-server -m m.gguf` as B on
# one GGUF (preset tiny), shot by shot, gives paired prefill and decode
# ratios with 95 % CIs (tests/compat/ab_table.py). A small workload: the
# figures in docs/compat.md come from scripts/compat-ab.sh.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/lib.sh"
cd "$E2E_TMP"
M="$E2E_TMP/tiny.gguf"
"$CALIPER" serve --preset tiny --export-gguf "$M" 2>/dev/null && ok "tiny exported" || { not_ok "export"; finish; }
pa=$(free_port); pb=$(free_port)
"$CALIPER" run --ab \
  --launch "$CALIPER serve --model $M --port $pa --threads 2" --url "http://127.0.0.1:$pa" \
  --launch "$LLAMA_BIN/llama-server -m $M --host 127.0.0.1 --port $pb -t 2 -c 2048 --no-webui" \
  --url "http://127.0.0.1:$pb" \
  --shots 4 --warmup 1 --prompt-tokens 128 --max-tokens 32 --requests 3 --no-telemetry \
  --db ab.db --json ab.json >ab.out 2>ab.err
rc=$?
[ $rc -eq 0 ] && ok "caliper run --ab: caliper serve --model vs llama-server, exit 0" \
  || { not_ok "--ab: exit $rc"; tail -8 ab.out ab.err; finish; }
grep -q 'A/B c1 · 128 tok: B ÷ A = ' ab.out && ok "the run's own A/B verdict is there" || not_ok "A/B verdict"
python3 "$COMPAT_DIR/ab_table.py" ab.json "caliper serve" "llama-server" >ab.md
rc=$?
cat ab.md
[ $rc -eq 0 ] && ok "paired prefill and decode ratios with CIs" || not_ok "paired ratios"
grep -q '^| prefill tok/s (median) | [0-9.]* | [0-9.]* | [0-9.]*× | [0-9.]*–[0-9.]* | [0-9]* |' ab.md \
  && ok "prefill row complete" || not_ok "prefill row"
finish
