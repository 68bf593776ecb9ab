#!/usr/bin/env bash
# The library never spells a command-line flag in its messages: an error or a
# note names the plan field or the quantity ("rate", "keep_chunks", "the
# duration"), and the command line that maps it adds its own flag. Every
# string literal under lib/ (comments left out) is scanned for "--name".
#
# The exceptions are text that is itself a command line:
#   lib/protocol/target.c  the built-in engine's argv ("--preset", "--port")
#   lib/ops/output.c       the report's caption naming the command that wrote
#                          the data ("caliper ops --json")
. "$(dirname "$0")/lib.sh"
need python3 "scanning lib/ for flag spellings" || finish
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

cat >"$E2E_TMP/scan.py" <<'PY'
import os, re, sys
root = sys.argv[1]
ALLOW = {
    ("lib/protocol/target.c", "--preset"), ("lib/protocol/target.c", "--port"),
    ("lib/ops/output.c", "per-op profile (<code>caliper ops --json</code>); bars add up, with the last row, "),
}
FLAG = re.compile(r"(?<![-\w])--[a-z][a-z0-9-]*")
# a C token stream: comments, strings, chars, anything else
TOK = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|.', re.S)
n = 0
for d, _, files in os.walk(os.path.join(root, "lib")):
    for f in sorted(files):
        if not f.endswith((".c", ".h")):
            continue
        path = os.path.join(d, f)
        rel = os.path.relpath(path, root)
        src = open(path, encoding="utf-8", errors="replace").read()
        for m in TOK.finditer(src):
            t = m.group(0)
            if not t.startswith('"'):
                continue
            body = t[1:-1]
            if FLAG.search(body) and (rel, body) not in ALLOW:
                line = src.count("\n", 0, m.start()) + 1
                print(f"{rel}:{line}: {t}")
            n += 1
print(f"# {n} string literals scanned", file=sys.stderr)
PY
python3 "$E2E_TMP/scan.py" "$ROOT" >"$E2E_TMP/hits"
rc=$?
check "the scan ran" [ $rc -eq 0 ]
if [ -s "$E2E_TMP/hits" ]; then
  not_ok "library strings spell command-line flags:"; sed 's/^/  | /' "$E2E_TMP/hits"
else
  ok "no library string spells a command-line flag"
fi
# the same scan sees a flag where one is (a planted tree, not lib/)
mkdir -p "$E2E_TMP/p/lib/x"
printf '/* --not-this */\n// --nor-this\nstatic const char *s = "give --rate", *t = "a-b x--y";\n' >"$E2E_TMP/p/lib/x/a.c"
python3 "$E2E_TMP/scan.py" "$E2E_TMP/p" >"$E2E_TMP/planted" 2>/dev/null
check "the scan finds a flag in a string, none in a comment" \
  bash -c "[ \"\$(cat '$E2E_TMP/planted')\" = 'lib/x/a.c:3: \"give --rate\"' ]"
finish
