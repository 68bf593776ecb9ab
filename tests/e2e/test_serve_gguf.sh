#!/usr/bin/env bash
# caliper serve --export-gguf and --model end to end: the export replaces a
# regular file whole and refuses any other kind of path (a link would have
# its target overwritten, a FIFO would block the export forever).
. "$(dirname "$0")/lib.sh"
T=$E2E_TMP
cd "$T" || exit 1

# export_refused NAME KIND: the export to NAME exits 2 promptly (timeout's
# 124 would be a hang), naming the path and what it is
export_refused() {
  timeout 120 "$CALIPER" serve --export-gguf "$1" >/dev/null 2>"$T/err"; local rc=$?
  check "--export-gguf to $2 exits 2 (rc $rc)" [ "$rc" -eq 2 ]
  check "--export-gguf to $2 names the path" grep -q -- "--export-gguf: \"$1\" is $2" "$T/err"
}

echo "keep me" >target
ln -s target link
export_refused link "a symbolic link"
check "the link's target is untouched" [ "$(cat target)" = "keep me" ]
check "the link is still a link to it" [ "$(readlink link)" = target ]

mkfifo fifo
export_refused fifo "a FIFO"
check "the FIFO is still a FIFO" [ -p fifo ]

mkdir dir
export_refused dir "a directory"

# a regular file is replaced by the model, and nothing else is left behind
"$CALIPER" serve --export-gguf target 2>"$T/err"; rc=$?
check "--export-gguf over a regular file exits 0" [ "$rc" -eq 0 ]
check "the file now holds a GGUF" [ "$(head -c 4 target)" = GGUF ]
check "no temporary file is left beside it" [ -z "$(ls -A | grep -v -x -e target -e link -e fifo -e dir -e err)" ]

finish
