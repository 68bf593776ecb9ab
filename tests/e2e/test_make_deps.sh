#!/usr/bin/env bash
# make test installs what it misses, by the only-what-is-missing apt step
# make run uses. On a fresh Debian 12, make test once stopped at "missing
# libraries: run 'make deps' (as root) first" right after make run
# (scripts/check-fresh.sh runs the whole story in a pristine root). Here:
# with everything installed the step says so and needs no root; a user who
# is not root and has no sudo is told what is missing and what to run, exit
# 2, before anything is built.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$E2E_TMP
command -v apt-get >/dev/null 2>&1 && command -v dpkg-query >/dev/null 2>&1 ||
  { echo "skip - not a Debian system: make test checks the libraries only"; finish; }
# the lists make test installs, as make prints them
pkgs=$(make -s -C "$ROOT" -pn check-deps 2>/dev/null | sed -n 's/^DEPS_\(BUILD\|TEST\) *:= *//p' | tr '\n' ' ')
check "make test's lists are read from the Makefile" [ -n "$pkgs" ]
missing=
for p in $pkgs; do
  [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing="$missing $p"
done
if [ -z "$missing" ]; then
  make -s -C "$ROOT" check-deps BUILD="$T/b" >"$T/ok.out" 2>&1; rc=$?
  check "everything installed: the step says so (rc $rc: $(head -c 200 "$T/ok.out"))" \
    sh -c "[ $rc -eq 0 ] && grep -q 'make test: packages all present' '$T/ok.out'"
else
  echo "skip - the installed check: missing here:$missing"
fi
# not root, no sudo, a package missing: named, with what to run, exit 2
as_user=
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups env PATH=/usr/bin:/bin HOME=/tmp)
elif [ "$(id -u)" != 0 ] && ! command -v sudo >/dev/null; then
  as_user=(env)
fi
if [ -n "${as_user[*]}" ]; then
  cp -r "$ROOT/Makefile" "$T/" && chmod -R a+rX "$T"
  "${as_user[@]}" make -s -C "$T" check-deps BUILD="$T/b" DEPS_TEST="jq caliper-no-such-package" \
    >"$T/user.out" 2>"$T/user.err"; rc=$?
  check "not root, a package missing: exit 2 (rc $rc)" [ "$rc" -eq 2 ]
  check "the message names the missing package and what to run as root" \
    grep -qF "make test: missing caliper-no-such-package; as root run 'make deps-build deps-test'" "$T/user.err"
else
  echo "skip - a user without root and without sudo is not at hand here"
fi
finish
