#!/usr/bin/env bash
# Man pages from the --help text: caliper.1 from `caliper --help`, and
# caliper-COMMAND.1 from `caliper COMMAND --help` for every command that
# `caliper --help` lists, so a page cannot drift from the flags it documents.
# Usage: scripts/gen-man.sh CALIPER_BINARY OUTDIR
set -euo pipefail
bin=$1; out=$2
mkdir -p "$out"
version=$("$bin" --version | awk '{print $2}')

# roff-safe: backslashes doubled as \e, a leading . or ' escaped with \&
esc() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/" -e 's/^-/\\-/'; }

page() { # name summary helptext-file see-also
  local name=$1 summary=$2 text=$3 see=$4 upper
  upper=$(printf '%s' "$name" | tr '[:lower:]' '[:upper:]')
  {
    printf '.TH %s 1 "" "caliper %s" "caliper manual"\n' "$upper" "$version"
    printf '.SH NAME\n%s \\- %s\n' "$name" "$(printf '%s' "$summary" | esc)"
    printf '.SH DESCRIPTION\n.nf\n'
    esc <"$text"
    printf '.fi\n.SH SEE ALSO\n%s\n' "$see"
  } >"$out/$name.1"
}

tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
"$bin" --help >"$tmp"
cmds=$(awk '/^commands:/{on=1; next} on && /^  [a-z]/{print $1} on && /^$/{exit}' "$tmp")
[ -n "$cmds" ] || { echo "gen-man: no commands in '$bin --help'" >&2; exit 1; }
see=
for c in $cmds; do see="$see${see:+, }caliper-$c (1)"; done
page caliper "measures LLM inference and records the protocol of every number" "$tmp" "$see"
for c in $cmds; do
  summary=$(awk -v c="$c" '$1 == c {sub(/^  [a-z]+ +/, ""); print; exit}' "$tmp")
  ctext=$(mktemp)
  "$bin" "$c" --help >"$ctext" 2>&1 || { echo "gen-man: '$bin $c --help' failed" >&2; rm -f "$ctext"; exit 1; }
  page "caliper-$c" "$summary" "$ctext" "caliper (1)"
  rm -f "$ctext"
done
