#!/usr/bin/env bash
# The README's promise on a pristine machine, checked the way a new user
# meets it: a `debootstrap --variant=minbase bookworm` root with only git and
# make added, the committed tree cloned into it, and the README's two
# commands run inside it in order: `make run`, then `make test`.
#
#   scripts/check-fresh.sh [--rebuild] [--keep] [--verbose] [--ref REF]
#
#   --rebuild   build the bare root again even when the cached one is fresh
#   --keep      leave the run's root in place (its path is printed)
#   --verbose   print the commands' whole output (always in the log)
#   --ref REF   the commit to clone (default HEAD; uncommitted changes are
#               not part of a clone)
#
# Needs root (debootstrap, chroot, mount) and debootstrap (make deps-ci).
# The bare root is kept as a tarball in $CALIPER_CACHE/fresh (default
# ~/.cache/caliper/fresh) and rebuilt when it is over 7 days old or its
# recipe changed; the packages apt downloads inside the root are kept in
# apt-archives/ beside it, so a second run downloads nothing it already has.
# Every run starts from the bare root again. /proc, /sys and /dev are
# mounted into the root while it runs and unmounted on exit, on error and on
# Ctrl-C (whatever still runs inside the root is stopped first).
# Exit 0 both commands passed; 1 one failed; 2 the check could not run.
set -euo pipefail

SUITE=bookworm
MIRROR=${CALIPER_FRESH_MIRROR:-http://deb.debian.org/debian}
MAX_AGE_DAYS=7
RECIPE="debootstrap --variant=minbase --include=git,make $SUITE $MIRROR (1)"

rebuild=0 keep=0 verbose=0 ref=HEAD
while [ $# -gt 0 ]; do
  case $1 in
    --rebuild) rebuild=1 ;;
    --keep) keep=1 ;;
    --verbose) verbose=1 ;;
    --ref) [ $# -ge 2 ] || { echo "check-fresh: --ref needs a commit" >&2; exit 2; }; ref=$2; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "check-fresh: unknown argument \"$1\" (try --help)" >&2; exit 2 ;;
  esac
  shift
done

say() { printf 'check-fresh: %s\n' "$*"; }
die() { printf 'check-fresh: %s\n' "$*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot and mount)"
for t in debootstrap chroot git tar flock mount umount; do
  command -v "$t" >/dev/null 2>&1 || die "$t is not installed (make deps-ci installs debootstrap)"
done

src=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel) || die "not inside the caliper git tree"
commit=$(git -C "$src" rev-parse --verify --quiet "$ref^{commit}") || die "--ref: \"$ref\" is not a commit"
cache=${CALIPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/caliper}/fresh
mkdir -p "$cache/apt-archives/partial"
base=$cache/base.tar
log=$cache/last.log

work='' root='' child='' interrupted=0
# Whatever runs with its root directory in ours: a server an end-to-end
# script left, make, the command itself. Only processes of this run's root.
inside() {
  local p r
  for p in /proc/[0-9]*; do
    r=$(readlink "$p/root" 2>/dev/null) || continue
    case $r in "$1"|"$1"/*) echo "${p#/proc/}" ;; esac
  done
}
mounts_under() { # mount points at or under $1, deepest first
  awk -v r="$1" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}
cleanup() {
  local rc=$? d pids i sig m
  trap - EXIT INT TERM
  exec 1>&3 2>&4   # a signal can land inside a redirected command
  [ "$interrupted" = 1 ] && rc=130
  for d in ${work:+"$work"} ${bwork:+"$bwork"}; do
    for i in 1 2 3 4 5 6 7 8 9 10; do
      pids=$(inside "$d/root")
      [ -z "$pids" ] && break
      sig=-TERM; [ "$i" -gt 5 ] && sig=-KILL
      # shellcheck disable=SC2086
      kill "$sig" $pids 2>/dev/null || true
      sleep 0.5
    done
    for m in $(mounts_under "$d/root"); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
    if [ -n "$(mounts_under "$d/root")" ]; then
      printf 'check-fresh: mounts are left under %s; not removing it:\n%s\n' "$d" "$(mounts_under "$d/root")" >&2
      rc=2
    elif [ "$keep" = 1 ] && [ "$d" = "$work" ]; then
      say "kept $d/root"
    else
      rm -rf --one-file-system "$d"
    fi
  done
  [ "$interrupted" = 1 ] && say "interrupted; the mounts are gone and nothing runs in the root"
  exit "$rc"
}
bwork=
exec 3>&1 4>&2
trap cleanup EXIT
trap 'interrupted=1; exit 130' INT TERM

# Runs $@ in the background and waits, so that Ctrl-C reaches the trap at
# once instead of after the command.
run_bg() { "$@" & child=$!; wait "$child"; }

# ---- the bare root: minbase plus git and make, cached ----------------------
exec 9>"$cache/lock"
flock 9
fresh=0
if [ "$rebuild" = 0 ] && [ -f "$base" ] && [ "$(cat "$cache/base.recipe" 2>/dev/null)" = "$RECIPE" ] &&
   [ -z "$(find "$base" -mtime +$MAX_AGE_DAYS)" ]; then
  say "bare root: cached $(date -r "$base" '+%Y-%m-%d %H:%M') ($base)"
else
  t0=$(date +%s)
  say "bare root: $RECIPE"
  bwork=$(mktemp -d "$cache/base.XXXXXX")
  if ! run_bg debootstrap --variant=minbase --include=git,make "$SUITE" "$bwork/root" "$MIRROR" \
       >"$cache/debootstrap.log" 2>&1; then
    tail -20 "$cache/debootstrap.log" >&2
    die "debootstrap failed (whole log: $cache/debootstrap.log)"
  fi
  chroot "$bwork/root" apt-get clean
  tar -C "$bwork/root" --numeric-owner -cf "$base.tmp" .
  mv -f "$base.tmp" "$base"
  printf '%s\n' "$RECIPE" >"$cache/base.recipe"
  rm -rf --one-file-system "$bwork"; bwork=
  fresh=1
  say "bare root: built in $(( $(date +%s) - t0 )) s"
fi
flock -u 9

# ---- this run's root ---------------------------------------------------------
work=$(mktemp -d "$cache/run.XXXXXX")
root=$work/root
mkdir "$root"
tar -C "$root" --numeric-owner -xpf "$base"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
git clone --quiet --no-checkout "$src" "$root/root/caliper"
git -C "$root/root/caliper" checkout --quiet "$commit"
say "tree: $(git -C "$src" log -1 --format='%h %s' "$commit")"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"; mount --make-rslave "$root/sys"
mount --rbind /dev "$root/dev"; mount --make-rslave "$root/dev"
mount --bind "$cache/apt-archives" "$root/var/cache/apt/archives"

: >"$log"
in_root() { # $1 = the command line, run as a new user's shell would
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb CI=true \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash -c "cd /root/caliper && $1"
}
status=0
for cmd in "make run" "make test"; do
  t0=$(date +%s)
  say "$cmd ..."
  echo "==== $cmd" >>"$log"
  if [ "$verbose" = 1 ]; then
    run_bg in_root "$cmd" > >(tee -a "$log") 2>&1 && rc=0 || rc=$?
  else
    run_bg in_root "$cmd" >>"$log" 2>&1 && rc=0 || rc=$?
  fi
  dt=$(( $(date +%s) - t0 ))
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1 || true)
  [ "$cmd" = "make test" ] && [ -n "$line" ] && line=": $line" || line=
  if [ "$rc" = 0 ]; then
    say "$cmd passed in $dt s$line"
  else
    [ "$verbose" = 1 ] || { tail -40 "$log"; grep -E '^(failing:|not ok )' "$log" || true; }
    say "$cmd failed (exit $rc) after $dt s$line; whole log: $log"
    status=1
    break
  fi
done
[ "$fresh" = 1 ] && say "(the bare root was built this time; the next run reuses it)"
exit "$status"
