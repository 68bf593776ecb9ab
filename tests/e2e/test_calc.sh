#!/usr/bin/env bash
# caliper calc and caliper fit end to end: the UX example prints its result
# and sentence, worked examples reproduce, every misuse exits 2 naming the
# flag and value, model files written here feed kv-bytes, CSVs feed fit.
. "$(dirname "$0")/lib.sh"
T=$E2E_TMP

# run NAME EXPECTED_RC ARGS...: output in $T/out, stderr in $T/err
run() {
  local n=$1 want=$2; shift 2
  "$CALIPER" "$@" >"$T/out" 2>"$T/err"; local rc=$?
  if [ "$rc" -eq "$want" ]; then ok "$n (exit $rc)"; else
    not_ok "$n: exit $rc, wanted $want"; sed 's/^/  | /' "$T/out" "$T/err"; fi
}
has()    { if grep -qF -- "$2" "$T/$1"; then ok "$3"; else not_ok "$3: no '$2' in $1"; sed 's/^/  | /' "$T/$1"; fi; }

# --- the UX example ---------------------------------------------------------
run "whole-turn UX example" 0 calc whole-turn --ttft 6.084s --decode 10.003s --speedup 1.11
has out "= (6.084 + 10.003 × 1.11) ÷ (6.084 + 10.003) = 1.068" "formula with numbers and result"
has out "An engine-side 1.11× becomes 1.07× of the user's whole turn: 38 % of the turn is waiting for the first token." "the sentence"
run "whole-turn s=1.42" 0 calc whole-turn --ttft 6.084s --decode 10.003s --speedup 1.42
has out "= 1.261" "whole-turn 1.261"
run "whole-turn s=2.58" 0 calc whole-turn --ttft 6084ms --decode 10.003 --speedup 2.58x
has out "= 1.982" "whole-turn 1.982 (ms and bare seconds)"
run "whole-turn --json" 0 calc whole-turn --ttft 6.084s --decode 10.003s --speedup 1.11 --json
has out '"calculator": "whole-turn"' "json names the calculator"
has out '"whole_turn_speedup": 1.0683987' "json result at full precision"
has out '"ttft": 6.084' "json inputs in base units"

# --- more worked examples ---------------------------------------------------
run "prefill" 0 calc prefill-throughput --tokens 4096 --seconds 4.850s
has out "844.5 tok/s" "prefill 844.5"
run "warm-from-cold" 0 calc warm-from-cold --cold 1048 --f-cold 1296 --f-warm 1162MHz --measured 946
has out "939.6 tok/s" "warm 939.6"
has out "clock alone" "measured 946 within 1-2 %: frequency only"
run "warm-from-cold far off" 0 calc warm-from-cold --cold 980 --f-cold 1296MHz --f-warm 1116MHz --measured 700
has out "cycles per token changed" "far off: cycles changed"
run "client-decode" 0 calc client-decode --tokens 377 --seconds 10.003s
has out "37.69 tok/s" "client 37.69"
run "power-split" 0 calc power-split --wall 60W --gpu 37.5W --memory 18.8W --gpu2 32W --memory2 24.4W
has out "60 − 56.4 = 3.6 W" "residual 3.6 W"
run "bandwidth 1674" 0 calc bandwidth-saving --bytes 2.7GB --bandwidth 1674GB/s
has out "1.613 ms" "1.61 ms"
run "bandwidth predicted" 0 calc bandwidth-saving --bytes 2.7GB --bandwidth 1133GB/s --tokens-per-step 3.264 --step-time 17.6ms --measured 193.3
has out "2.383 ms" "2.38 ms"
has out "214.5 tok/s" "214.5 tok/s"
has out "did not fill the step" "measured below the bound"
run "amdahl-share" 0 calc amdahl-share --kernel-speedup 67.87x --e2e-gain 5.5%
has out "= 0.0529" "p = 0.0529"
run "coverage-from-ceiling" 0 calc coverage-from-ceiling --ceiling 1.69
has out "0.408" "coverage 0.408"
has out "59 % belongs to no kernel" "59 % outside kernels"
run "kv-bytes MoE" 0 calc kv-bytes --layers 11 --kv-heads 8 --head-dim 128 --kv-bits 4 --group-size 64 --tokens 1Mi --measured 39.4KB
has out "12.67 KB" "12.7 KB/token"
has out "13.29 GB" "13.3 GB per Mi tokens"
has out "3.11× the formula" "3.1× measured"
run "overcommit" 0 calc overcommit --limits 61GB,61GB --memory 64GB
has out "1.906" "1.9× overcommit"
run "leak-watch" 0 calc leak-watch --resolution 1GB --growth 20GB --over 3.5d
has out "4.200 h" "watch 4.2 h"
run "spec-decode" 0 calc spec-decode --alpha 0.8 --k 3 --t-decode 10ms --t-verify 12ms --t-draft 1.5ms
has out "2.952 tokens per round" "E held out"
has out "= 1.789" "speedup held out"
has out "0.4113" "break-even held out"

# --- list and help ----------------------------------------------------------
run "calc --list" 0 calc --list
for c in prefill-throughput warm-from-cold power-split whole-turn client-decode bandwidth-saving \
         capacity amdahl amdahl-share coverage-ceiling coverage-from-ceiling launch-overhead \
         kv-bytes kv-sequences usable-context decode-context leak-watch overcommit batching-gain \
         spec-decode quality two-sample median roofline energy; do
  grep -q "^  $c " "$T/out" || not_ok "--list lacks $c"
  "$CALIPER" calc "$c" --help >"$T/h" 2>&1 && grep -q "usage: caliper calc $c" "$T/h" \
    || not_ok "calc $c --help"
done
ok "every calculator listed with --help"
# every example printed by --help runs (those that need no files)
while read -r c _; do
  ex=$("$CALIPER" calc "$c" --help | awk '/^example:/{getline; sub(/^ *caliper /,""); print}')
  case "$ex" in *.txt*|*.json*|*.gguf*|"") continue;; esac
  eval "\"\$CALIPER\" $ex" >"$T/ex" 2>&1 || { not_ok "example of $c fails: $ex"; cat "$T/ex"; }
done < <("$CALIPER" calc --list | tail -n +2)
ok "the --help examples run"

# --- misuse: exit 2, the flag and value named ------------------------------
run "negative time" 2 calc whole-turn --ttft -1s --decode 10s --speedup 1.1
has err '--ttft: "-1s"' "names --ttft and its value"
run "missing flag" 2 calc whole-turn --ttft 1s --decode 10s
has err "--speedup is required" "names the missing flag"
run "wrong unit" 2 calc whole-turn --ttft 5GB --decode 10s --speedup 1.1
has err '--ttft: "5GB" is not a time' "names a value of the wrong kind"
run "share > 1" 2 calc amdahl --kernel-speedup 4 --share 1.2
has err '--share: "1.2"' "share > 1 named"
run "alpha = 1" 2 calc spec-decode --alpha 1 --k 4 --t-decode 10ms --t-verify 14ms --t-draft 2ms
has err '--alpha: "1"' "alpha = 1 named"
run "zero seconds" 2 calc prefill-throughput --tokens 4096 --seconds 0
has err "--seconds" "zero division named"
run "same n twice" 2 calc usable-context --n1 1k --peak1 1GB --n2 1k --peak2 2GB --budget 8GB
has err "--n2" "two identical x named"
run "impossible e2e" 2 calc amdahl-share --kernel-speedup 2 --e2e 3
has err "--e2e" "more gain than the kernel allows"
run "wall below parts" 2 calc power-split --wall 50W --gpu 37.5W --memory 18.8W
has err "--wall" "wall below its parts"
run "unknown calculator" 2 calc warp-drive
run "unknown flag" 2 calc whole-turn --ttft 1s --decode 1s --speedup 1 --sped 2
has err "--sped" "unknown flag named"
# zero, degenerate and overflowing inputs: an error naming the flag, never a verdict
run "bandwidth-saving 0GB" 2 calc bandwidth-saving --bytes 0GB --bandwidth 1133GB/s --tokens-per-step 3.264 --step-time 17.6ms --measured 193.3
has err '--bytes: "0GB" is out of range: must be > 0' "0 bytes saved named"
if grep -q "inf" "$T/out" "$T/err"; then not_ok "0 bytes printed inf"; else ok "no inf printed"; fi
run "bandwidth-saving above the bound" 0 calc bandwidth-saving --bytes 1B --bandwidth 1133GB/s --tokens-per-step 3.264 --step-time 17.6ms --measured 193.3
has out "above the bound" "a measurement over the bound is not called bandwidth on the critical path"
run "zero tokens" 2 calc prefill-throughput --tokens 0 --seconds 1s
has err '--tokens: "0"' "0 tokens named"
run "zero decode" 2 calc whole-turn --ttft 1s --decode 0 --speedup 2
has err '--decode: "0"' "0 decode named"
run "zero power" 2 calc energy --power 0W --rate 74.1
has err '--power: "0W"' "0 W named"
run "zero prices" 2 calc energy --power 60W --rate 74.1 --price-kwh 0
has err '--price-kwh "0"' "all-zero prices named"
run "zero model" 2 calc capacity --models 0GB,3GB --memory 64GB
has err '--models: "0GB,3GB"' "a 0-byte model named"
run "zero kv heads" 2 calc kv-bytes --layers 32 --kv-heads 0 --head-dim 128
has err '--kv-heads: "0"' "0 KV heads named, not called missing"
run "NaN input" 2 calc amdahl --kernel-speedup nan --share 5%
has err '--kernel-speedup: "nan"' "NaN named"
run "infinite input" 2 calc roofline --bytes-per-token inf --bandwidth 1TB/s
has err '--bytes-per-token: "inf"' "inf named"
run "overflowing result" 2 calc spec-decode --alpha 0.5 --k 4 --t-decode 1e-320s --t-verify 14ms --t-draft 2ms
has err "not a finite number" "a non-finite result is an error"

# --- model files written here ----------------------------------------------
cat >"$T/config.json" <<'EOF'
{"architectures":["LlamaForCausalLM"],"hidden_size":4096,"num_attention_heads":32,
 "num_hidden_layers":32,"num_key_value_heads":8,"torch_dtype":"bfloat16"}
EOF
run "kv-bytes --config" 0 calc kv-bytes --config "$T/config.json"
has out "131.1 KB" "Llama-8B-shaped config: 128 KiB per token"
le32() { printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $(($1 >> 8 & 255)) \
                   $(($1 >> 16 & 255)) $(($1 >> 24 & 255)))"; }
le64() { le32 "$1"; le32 0; }
gstr() { le64 ${#1}; printf '%s' "$1"; }
kvu32() { gstr "$1"; le32 4; le32 "$2"; }
{ printf 'GGUF'; le32 3; le64 0; le64 5
  kvu32 qwen2.block_count 28; kvu32 qwen2.attention.head_count 28
  kvu32 qwen2.attention.head_count_kv 4; kvu32 qwen2.embedding_length 3584
  gstr general.architecture; le32 8; gstr qwen2; } >"$T/m.gguf"
run "kv-bytes --gguf" 0 calc kv-bytes --gguf "$T/m.gguf" --kv-bits 8
has out "from gguf: qwen2" "reads the architecture"
has out "= 2 × 28 × 4 × 128 × 1 = 28.67 KB" "28 layers × 4 KV heads × 128 at 8 bits"
head -c 110 "$T/m.gguf" >"$T/cut.gguf"
run "kv-bytes truncated gguf" 2 calc kv-bytes --gguf "$T/cut.gguf"
has err "--gguf" "names the flag"
has err "runs past the end" "says why"
run "kv-bytes missing file" 2 calc kv-bytes --config "$T/nope.json"
has err "--config" "missing file named"

# --- statistics from files -------------------------------------------------
printf '7.5\n8.0\n9.0\n6.5\n8.5\n9.5\n7.0\n8.0\n' >"$T/a.txt"
printf '8.0\n8.0\n8.5\n7.5\n9.0\n9.5\n7.5\n8.5\n' >"$T/b.txt"
printf '0\n0\n0.5\n-0.5\n0\n' >"$T/same.txt"
run "quality" 0 calc quality --a "$T/a.txt" --b "$T/b.txt" --identical "$T/same.txt"
has out "= 1.93 (df 7" "paired t"
has out "No detectable change" "CI contains 0"
has out "judge noise: 5 identical pairs" "judge noise"
printf '1\n2\n' >"$T/short.txt"
run "quality unequal" 2 calc quality --a "$T/a.txt" --b "$T/short.txt"
has err "--b" "unequal files named"
run "median" 0 calc median --file "$T/a.txt" --seed 7
cp "$T/out" "$T/median1"
run "median again" 0 calc median --file "$T/a.txt" --seed 7
if cmp -s "$T/out" "$T/median1"; then ok "same seed, same CI"; else not_ok "bootstrap not deterministic"; fi
run "huge seed" 2 calc median --file "$T/a.txt" --seed 1e30
has err '--seed "1e30"' "a seed past 2^53 named"

# --- fit on CSV --------------------------------------------------------------
printf 'n,seconds\n512,0.602\n1024,1.118\n2048,2.153\n4096,4.199\n' >"$T/before.csv"
printf 'n,seconds\n512,0.811\n1024,1.333\n2048,2.358\n4096,4.402\n' >"$T/after.csv"
run "fit prefill two CSVs" 0 fit prefill "$T/before.csv" --csv "$T/after.csv"
has out "fixed overhead grew by" "fixed overhead grew"
has out "per-token cost" "per-token line"
has out "fixed overhead changed, the per-token cost did not" "verdict"
has out "only a lower bound" "TTFT reminder"
printf 'n,seconds\n512,0.6\n512,0.7\n2048,2.1\n' >"$T/dup.csv"
run "fit duplicate x" 2 fit prefill --csv "$T/dup.csv"
has err "same x = 512" "duplicate x named"
printf 'n,seconds\n512,0.6\n1024,1.1\n' >"$T/two.csv"
run "fit too few" 2 fit prefill --csv "$T/two.csv"
has err "at least 3" "needs 3 points"
printf 'n,bytes\n32000,64.0GB\n64000,65.3GB\n128000,67.8GB\n' >"$T/mem.csv"
run "fit memory" 0 fit memory --csv "$T/mem.csv" --budget 72GB
has out "tokens of context fit" "usable context"
run "fit --json" 0 fit memory --csv "$T/mem.csv" --budget 72GB --json
has out '"n_max":' "json n_max"
run "fit missing column" 2 fit leak --csv "$T/mem.csv"
has err 'no column "t"' "names the missing column"
# careless files: each an error naming what is wrong, never a silent number
printf 'n,seconds\n64,0.25\n128,0,1\n256,0.9\n512,1.7\n' >"$T/comma.csv"
run "fit decimal comma" 2 fit prefill --csv "$T/comma.csv"
has err "line 3 (data row 2) has 3 fields where the header has 2" "decimal-comma row named"
# a negative time or token count would fit a negative per-token cost
printf 'n,seconds\n512,0.602\n1024,-1.118\n2048,2.153\n' >"$T/negt.csv"
run "fit negative time" 2 fit prefill --csv "$T/negt.csv"
has err 'data row 2: seconds = -1.118 is not a finite value >= 0 (prefill time)' "negative time named by row and column"
printf 'n,seconds\n-512,0.602\n1024,1.118\n2048,2.153\n' >"$T/negn.csv"
run "fit negative token count" 2 fit prefill --csv "$T/negn.csv"
has err 'data row 1: n = -512 is not a finite value >= 0 (prompt tokens)' "negative count named by row and column"
if grep -q 'per-token' "$T/out"; then not_ok "a per-token cost was printed"; else ok "no per-token cost printed"; fi
printf 'n,seconds\n1,1e308\n2,1e308\n3,1e308\n' >"$T/huge.csv"
run "fit 1e308" 2 fit prefill --csv "$T/huge.csv"
has err "too large to fit a line" "non-finite fit refused"
if grep -q nan "$T/out" "$T/err"; then not_ok "fit 1e308 printed a NaN"; else ok "no NaN printed"; fi
printf 'n,seconds\n1e300,1\n2e300,2\n3e300,3\n' >"$T/hugex.csv"
run "fit x 1e300" 2 fit prefill --csv "$T/hugex.csv"
has err "too large to fit a line" "overflowing x is not called a duplicate"
printf '\xef\xbb\xbfn,seconds\r\n512,0.602\r\n1024,1.118\r\n2048,2.153\r\n' >"$T/bom.csv"
run "fit BOM and CRLF" 0 fit prefill --csv "$T/bom.csv"
has out "3 points" "BOM header read"
printf 'n,seconds\n1,10\n2,20\n3,30.1\n' >"$T/steep.csv"
run "fit decode-context --at too far" 2 fit decode-context --csv "$T/steep.csv" --at 1e308
has err '--at' "a prediction that is not finite is refused"
printf 'n,bytes\n1,1e-300\n2,2e-300\n3,3e-300\n' >"$T/flat.csv"
run "fit memory infinite n_max" 2 fit memory --csv "$T/flat.csv" --budget 10GB
has err '--budget' "an infinite usable context is refused"
# --- fit on stored runs: two prompt sweeps of the built-in engine ----------
for l in sweepA sweepB; do
  "$CALIPER" run --preset tiny --prompt-tokens 32,64,128 --max-tokens 2 --requests 2 \
    --no-telemetry --label $l --db "$T/c.db" >"$T/run.$l" 2>&1 || { not_ok "run $l"; cat "$T/run.$l"; }
done
run "fit prefill two stored runs" 0 fit prefill sweepA sweepB --db "$T/c.db"
has out "run 1 (sweepA, prompt sweep): 3 points" "reads the prompt sweep cells"
has out "verdict:" "before/after verdict from the store"
run "fit prefill --field" 0 fit prefill 1 --db "$T/c.db" --field median_e2el_ms --json
has out '"source": "run 1' "json from a stored run"
run "fit prefill unknown run" 2 fit prefill 99 --db "$T/c.db"
has err '"99" is neither a CSV file nor a run' "unknown run named"
run "fit prefill non-time field" 2 fit prefill 1 --db "$T/c.db" --field output_throughput
has err "--field" "a field that is not a time"
# the engine's RSS comes from the platform's process readings (none on posix)
if [ "$(cal_platform)" != posix ]; then
"$CALIPER" run --preset tiny --prompt-tokens 64 --max-tokens 32 --requests 30 --interval 50ms \
  --label tel --db "$T/c.db" >"$T/run.tel" 2>&1 || { not_ok "run tel"; cat "$T/run.tel"; }
run "fit leak from a run's telemetry" 0 fit leak tel --db "$T/c.db" --resolution 1MB
has out "telemetry rss_bytes" "reads the engine's RSS samples"
has out "slope =" "slope with CI"
else
  echo "skip - fit leak from a run's telemetry: no process readings on platform posix"
fi
run "fit memory from a run" 2 fit memory tel --db "$T/c.db"
has err "reads CSV" "memory fits read CSV only"
finish
