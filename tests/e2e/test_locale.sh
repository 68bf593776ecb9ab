#!/usr/bin/env bash
# Under a de_DE locale (decimal comma) `caliper run` against the built-in
# engine prints, stores and exports exactly what it does under C: the stored
# run's show, report (HTML, Markdown, CSV, JSON) and export (JSON, CSV) are
# byte for byte the same; the live run's terminal output and JSON have the
# same shape, with only measured numbers allowed to differ. The locale is
# built with localedef into a temporary LOCPATH (package "locales").
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# In the sources: no number read or written through the process locale
# outside lib/util/locale.c (cal_strtod, cal_snprintf... instead).
if out=$(cd "$ROOT" && python3 scripts/check-locale.py $(ls lib/*/*.c | grep -v '^lib/util/locale\.c$')); then
  ok "libcaliper reads and writes numbers only through the C-locale calls"
else
  not_ok "locale-dependent number calls in lib/: $out"
fi
LOC="$E2E_TMP/locales"
mkdir -p "$LOC"
localedef -i de_DE -f UTF-8 "$LOC/de_DE.UTF-8" >/dev/null 2>&1
if [ ! -f "$LOC/de_DE.UTF-8/LC_NUMERIC" ]; then
  not_ok "localedef builds de_DE.UTF-8 (install the Debian package locales: make deps)"; finish
fi
# glibc's setlocale keeps the LOCPATH list it splits (argz) without freeing
# it: a leak of the C library, not caliper's, that LeakSanitizer would report.
printf 'leak:__argz_add_sep\nleak:_nl_find_locale\n' >"$E2E_TMP/lsan.supp"
C_ENV=(env LC_ALL=C LANG=C)
DE_ENV=(env LOCPATH="$LOC" LC_ALL=de_DE.UTF-8 LANG=de_DE.UTF-8
        LSAN_OPTIONS="suppressions=$E2E_TMP/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}")
# The locale is real: the C library under it writes a decimal comma.
got=$("${DE_ENV[@]}" /usr/bin/printf '%.1f' 2.5 2>/dev/null)
[ "$got" = "2,5" ] && ok "de_DE writes 2.5 as 2,5 (printf(1))" ||
  { not_ok "de_DE is not in effect (printf gave '$got')"; finish; }

cd "$E2E_TMP" || exit 1
RUN=(run --preset tiny --prompt-tokens 32,48 --max-tokens 8 --concurrency 1,2 --requests 4
     --shots 2 --seed 7 --no-telemetry)
mkdir -p C DE
(cd C && "${C_ENV[@]}" "$CALIPER" "${RUN[@]}" --db r.db --json r.json >../c.out 2>../c.err); rc_c=$?
(cd DE && "${DE_ENV[@]}" "$CALIPER" "${RUN[@]}" --db r.db --json r.json >../de.out 2>../de.err); rc_de=$?
cp C/r.json c.json; cp DE/r.json de.json; cp C/r.db c.db
[ $rc_c -eq 0 ] && [ $rc_de -eq 0 ] && ok "caliper run under C and de_DE" ||
  { not_ok "caliper run: exit $rc_c (C), $rc_de (de_DE): $(tail -2 de.err)"; finish; }

# Live output: every number is a measurement or an id here; mask them
# (12.5 and 12,5 mask differently, so a decimal comma still shows) and
# compare the rest. A measurement a loaded machine did not get prints "—"
# (decode speed with a single chunk, say): it masks like a number. Sentences whose presence and wording follow the
# measurement (verdicts) are checked by format only: no decimal comma.
mask() {
  sed -E -e '/^(verdict|read|clock|note|client self-check): /d' -e '/^caliper run: client self-check, /d' \
         -e 's/[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?/N/g' -e 's/—/N/g' -e 's/ +/ /g' "$1"
}
commas() { grep -nE '[0-9],[0-9]' "$1" | grep -vE -- '--concurrency|--prompt-tokens' ; }
for s in out err; do
  if diff <(mask "c.$s") <(mask "de.$s") >"diff.$s"; then
    ok "run's std$s has the same shape under de_DE"
  else
    not_ok "run's std$s differs under de_DE: $(head -6 "diff.$s")"
  fi
  bad=$(commas "de.$s")
  [ -z "$bad" ] && ok "no decimal comma in run's std$s under de_DE" || not_ok "decimal comma: $bad"
done
check "the live run's detail names the OpenBLAS kernels" grep -q '"detail": ".*OpenBLAS' de.json

# The live JSON: same keys, same array lengths, same value types, and the
# same strings once numbers are masked (verdict sentences: no comma decimal).
if python3 - c.json de.json <<'PY'
import json, re, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def m(s): return re.sub(r'\d+(\.\d+)?', 'N', s)
def strings(v):
    if isinstance(v, dict): return [s for w in v.values() for s in strings(w)]
    if isinstance(v, list): return [s for w in v for s in strings(w)]
    return [v] if isinstance(v, str) else []
def walk(x, y, path):
    if re.search(r'verdict|note', path.split('.')[-1]):   # present as measured
        assert not [s for s in strings(y) if re.search(r'\d,\d', s)], (path, y)
    elif re.search(r'^(metrics|samples)$', path.split('.')[-1]) and isinstance(x, dict):
        # a view's cell lists the metrics it measured (a statistic with no
        # sample, say TPOT when a loaded host delivered a request's tokens in
        # one read, is left out): the keys both runs measured compare alike
        assert isinstance(y, dict), (path, y)
        for k in x:
            if k in y: walk(x[k], y[k], path + '.' + k)
    elif isinstance(x, dict):
        assert isinstance(y, dict) and list(x) == list(y), (path, list(x), y if not isinstance(y, dict) else list(y))
        for k in x: walk(x[k], y[k], path + '.' + k)
    elif isinstance(x, list) and all(isinstance(v, (int, float)) for v in x + y):
        assert isinstance(y, list), path     # a measured series: its length is measured too
    elif isinstance(x, list):
        assert isinstance(y, list) and len(x) == len(y), (path, len(x))
        for i, (p, q) in enumerate(zip(x, y)): walk(p, q, '%s[%d]' % (path, i))
    elif isinstance(x, bool) or x is None:
        assert type(x) == type(y) or x is None or y is None, (path, x, y)
    elif isinstance(x, (int, float)):
        assert isinstance(y, (int, float)) and not isinstance(y, bool) or y is None, (path, x, y)
    elif isinstance(x, str):
        assert isinstance(y, str), (path, x, y)
        assert not re.search(r'\d,\d', y), (path, y)
        if not re.search(r'verdict|url|started|ended|load|build|detail', path):
            assert m(x) == m(y), (path, x, y)
walk(a, b, '$')
PY
then ok "run --json has the same structure under de_DE"; else not_ok "run --json differs in structure under de_DE"; fi

# One stored run, rendered under both locales: byte for byte.
same() { # name, caliper args...
  local n=$1; shift
  "${C_ENV[@]}" "$CALIPER" "$@" >"$n.c" 2>"$n.c.err"; local r1=$?
  "${DE_ENV[@]}" "$CALIPER" "$@" >"$n.de" 2>"$n.de.err"; local r2=$?
  if [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ -s "$n.c" ] && cmp -s "$n.c" "$n.de"; then
    ok "$n is byte for byte the same under de_DE"
  else
    not_ok "$n under de_DE (exit $r1/$r2): $(diff "$n.c" "$n.de" | head -4) $(tail -3 "$n.de.err")"
  fi
}
same show show 1 --db c.db
same runs runs --db c.db
same "report html" report 1 --db c.db --format html
same "report md" report 1 --db c.db --format md
same "report csv" report 1 --db c.db --format csv
same "report json" report 1 --db c.db --format json
same "export json" export 1 --json --db c.db
same "export csv" export 1 --csv --db c.db
grep -q '<svg' "report html.c" && grep -qE 'cx="[0-9]+\.[0-9]"' "report html.c" &&
  ok "the report has SVG charts with decimal coordinates" || not_ok "no SVG coordinates in the report"
finish
