#!/usr/bin/env bash
# The portable core: no file outside the per-platform files
# (lib/platform/<platform>.c, lib/*/*_<platform>.c) uses a Linux-only
# interface, and the check finds one where there is one. The binary names
# the platform it was built for.
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if out=$(python3 "$ROOT/scripts/check-platform.py" "$ROOT"); then
  ok "no Linux-only interface outside the per-platform files"
else
  not_ok "Linux-only interfaces outside the per-platform files: $out"
fi
# The check itself: a use in an ordinary file is found, one in a comment or
# in a per-platform file is not.
T="$E2E_TMP/tree"
mkdir -p "$T/lib/probe" "$T/lib/platform" "$T/src"
printf '#include <sys/epoll.h>\nint f(void) { return epoll_create1(0); }\n' >"$T/lib/probe/loop.c"
printf '/* reads /proc/self/exe, prctl */\nint g(void) { return 0; } // epoll_wait\n' >"$T/src/ok.c"
printf 'int h(void) { return prctl(1); }\n' >"$T/lib/platform/linux.c"
printf 'const char *p = "/proc/%%d/stat";\n' >"$T/lib/probe/x_linux.c"
out=$(python3 "$ROOT/scripts/check-platform.py" "$T"); rc=$?
if [ $rc -eq 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 2 ] &&
   printf '%s\n' "$out" | grep -q '^lib/probe/loop.c:1: sys/epoll.h$' &&
   printf '%s\n' "$out" | grep -q '^lib/probe/loop.c:2: epoll_create1$'; then
  ok "the check names each use outside the platform files, and only those"
else
  not_ok "the check on a planted tree: rc $rc, got: $out"
fi
plat=$(cal_platform)
case "$plat" in
  linux|darwin|posix) ok "caliper --version names its platform ($plat)" ;;
  *) not_ok "caliper --version names no platform: $("$CALIPER" --version)" ;;
esac
finish
