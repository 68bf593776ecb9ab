#!/usr/bin/env bash
# caliper sample end to end: --list names every backend and why it is absent,
# sampling around a command writes rows for its lifetime and returns its exit
# code, captured trees are read through --root, Prometheus serves the latest
# values, and bad flags exit 2 naming the flag and the value.
source "$(dirname "$0")/lib.sh"
DATA="$(cd "$(dirname "$0")/../data/sysfs" && pwd)"
T=$E2E_TMP
# Linux's CPU clock backends and /proc exist only in a Linux build; the
# generic POSIX build has no way to read another process (docs/macos.md).
LINUX=0; skip_unless linux "cpufreq, cpuinfo, throttle and /proc readings" && LINUX=1
BACKENDS="rapl hwmon thermal nvml amdgpu apple process"
[ $LINUX -eq 1 ] && BACKENDS="cpufreq cpuinfo rapl hwmon thermal throttle nvml amdgpu apple process"
NB=$(echo $BACKENDS | wc -w)

# --list: every backend, each with a status and a reason
"$CALIPER" sample --list >"$T/list" 2>&1; rc=$?
check "--list exits 0" [ "$rc" -eq 0 ]
for b in $BACKENDS; do
  line=$(grep -E "^$b " "$T/list")
  if [ -n "$line" ] && echo "$line" | grep -qE ' (available|absent) +[^ ]'; then ok "--list names $b with a reason"
  else not_ok "--list names $b with a reason"; cat "$T/list"; fi
done
check "apple is absent: not macOS" grep -qE '^apple +absent +not macOS' "$T/list"
if [ $LINUX -eq 1 ]; then
  check "process is absent without a target" grep -qE '^process +absent +no target process' "$T/list"
else
  check "process is absent: no way to read another process" grep -qE '^process +absent +no way to read' "$T/list"
fi
if [ ! -d /sys/class/powercap ]; then
  check "rapl absent names the missing directory" grep -qE '^rapl +absent +no such file: /sys/class/powercap' "$T/list"
fi
if [ $LINUX -eq 0 ] || ! grep -q 'cpu MHz' /proc/cpuinfo || [ -e /sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq ]; then
  ok "cpuinfo check skipped (cpufreq present or no cpu MHz)"
else
  check "cpuinfo is absent or moving, never a static nominal reading" \
    grep -qE '^cpuinfo +(absent +static|available .*moves)' "$T/list"
fi

# with a target process, process is available; a backend whose source is
# missing on this host is absent (on a GPU-less VM: all but process)
"$CALIPER" sample --list --pid $$ >"$T/list2" 2>&1
[ $LINUX -eq 1 ] && check "process available with --pid" grep -qE "^process +available +pid $$" "$T/list2"
[ -d /sys/class/powercap ] || check "rapl absent here" grep -qE '^rapl +absent' "$T/list2"
[ -d /sys/class/hwmon ] || check "hwmon absent here" grep -qE '^hwmon +absent' "$T/list2"
[ -d /sys/class/drm ] || check "amdgpu absent here" grep -qE '^amdgpu +absent' "$T/list2"
[ $LINUX -eq 0 ] || ls /sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq >/dev/null 2>&1 || \
  check "cpufreq absent here" grep -qE '^cpufreq +absent' "$T/list2"
ldconfig -p 2>/dev/null | grep -q libnvidia-ml.so.1 || \
  check "nvml absent here" grep -qE '^nvml +absent +no such library' "$T/list2"

# around a command: ticks every 100 ms over `sleep 2`, RSS and CPU time rows.
# How many ticks fit depends on how busy the machine is; what does not: the
# rows come in time order, and on a 100 ms grid that skips a late tick
# rather than bursting, so the n-th reading is at least (n-1) x 100 ms in.
"$CALIPER" sample --interval 100ms --csv "$T/x.csv" -- sleep 2 2>"$T/err"; rc=$?
check "sample -- sleep 2 exits 0" [ "$rc" -eq 0 ]
check "CSV header" grep -qx 't_s,backend,metric,unit,value,note' "$T/x.csv"
if [ $LINUX -eq 1 ]; then
n=$(grep -c ',process,rss_bytes,B,' "$T/x.csv")
check "RSS rows over the command's life ($n)" [ "$n" -ge 2 ]
check "RSS rows in strictly increasing time, on the 100 ms grid (no burst)" \
  awk -F, '$3=="rss_bytes" { if (n && $1 <= last) exit 1; last = $1; n++ }
           END { exit !(n >= 2 && last >= (n - 1) * 0.1 - 1e-6) }' "$T/x.csv"
check "CPU time rows" grep -q ',process,cpu_time_s,s,' "$T/x.csv"
check "RSS is a positive number" awk -F, '$3=="rss_bytes" && $5>0 {f=1} END{exit !f}' "$T/x.csv"
fi
check "no sample from an absent backend" bash -c "! grep -qE ',(nvml|apple),' '$T/x.csv'"

# the command's exit code comes back, also when it is killed
"$CALIPER" sample --interval 50ms --csv "$T/y.csv" -- sh -c 'sleep 0.2; exit 3' 2>/dev/null; rc=$?
check "exit code 3 propagated" [ "$rc" -eq 3 ]
"$CALIPER" sample --interval 50ms --csv "$T/y.csv" -- sh -c 'kill -TERM $$' 2>/dev/null; rc=$?
check "a signalled command gives 128+signal" [ "$rc" -eq 143 ]
"$CALIPER" sample --csv "$T/y.csv" -- /nonexistent/cmd 2>/dev/null; rc=$?
check "a command that cannot start gives 127" [ "$rc" -eq 127 ]

# JSON: one document with backends and samples
"$CALIPER" sample --interval 50ms --json "$T/x.json" -- sleep 0.4 2>/dev/null; rc=$?
check "--json exits 0" [ "$rc" -eq 0 ]
if need python3 "reading the --json document"; then
  check "--json is valid JSON with every backend (and process samples where readable)" python3 -c "
import json,sys; d=json.load(open('$T/x.json'))
assert len(d['backends'])==$NB
s=[x for x in d['samples'] if x['metric']=='rss_bytes']
assert ($LINUX==0 or len(s)>=4) and all(x['value']>0 for x in s), len(s)"
fi

if [ $LINUX -eq 1 ]; then
# a captured tree through --root: what an Intel desktop exposes
"$CALIPER" sample --list --root "$DATA/intel_desktop" >"$T/l2" 2>&1
check "captured tree: cpufreq available, 4 cores" grep -qE '^cpufreq +available +4 cores' "$T/l2"
check "captured tree: rapl 5 zones" grep -qE '^rapl +available +5 zones' "$T/l2"
"$CALIPER" sample --root "$DATA/intel_desktop" --pid 4242 --interval 20ms --duration 0.2s \
  --csv "$T/d.csv" 2>/dev/null; rc=$?
check "--duration ends a stand-alone run" [ "$rc" -eq 0 ]
check "captured tree: cpu0 at 3600 MHz" grep -q ',cpufreq,cpu0_mhz,MHz,3600,' "$T/d.csv"
check "captured tree: process RSS from VmRSS" grep -q ',process,rss_bytes,B,1688965120,' "$T/d.csv"

# Prometheus: the latest values over loopback
"$CALIPER" sample --root "$DATA/intel_desktop" --interval 50ms --duration 3s \
  --prometheus 127.0.0.1:0 --csv "$T/p.csv" 2>"$T/p.err" &
E2E_PIDS+=($!)
port=
for i in $(seq 1 2400); do
  port=$(grep -oE '127\.0\.0\.1:[0-9]+' "$T/p.err" | head -1 | cut -d: -f2)
  [ -n "$port" ] && break; sleep 0.05
done
if [ -z "$port" ]; then
  not_ok "prometheus did not start"; cat "$T/p.err"
elif need curl "scraping the prometheus endpoint"; then
  # until the first sample is published (a readiness wait, not a guess)
  for i in $(seq 1 2400); do
    curl -s "http://127.0.0.1:$port/metrics" >"$T/metrics"
    grep -q 'cpu_mhz_mean' "$T/metrics" && break; sleep 0.05
  done
  check "prometheus serves cpu_mhz_mean" grep -q '^caliper_telemetry{backend="cpufreq",metric="cpu_mhz_mean",unit="MHz"} 3000$' "$T/metrics"
  check "prometheus lists absent backends as 0" grep -q '^caliper_telemetry_backend_available{backend="nvml"} 0$' "$T/metrics"
fi
fi

# usage errors: exit 2, flag and value named
bad() { # name expected-text args...
  local name=$1 want=$2; shift 2
  "$CALIPER" sample "$@" >/dev/null 2>"$T/bad"; local rc=$?
  if [ "$rc" -eq 2 ] && grep -qF -- "$want" "$T/bad"; then ok "$name"; else not_ok "$name (rc $rc)"; cat "$T/bad"; fi
}
bad "--interval 5ms is refused" '--interval: "5ms"' --interval 5ms -- true
bad "--interval abc is refused" '--interval: "abc"' --interval abc
bad "--pid abc is refused" '--pid: "abc"' --pid abc
bad "--pid of no process is refused" '--pid: "999999"' --pid 999999
bad "--prometheus needs IPv4:PORT" '--prometheus: "localhost"' --prometheus localhost
bad "--csv with --json is refused" '--json: "b"' --csv a --json b
bad "--duration 0 is refused" '--duration: "0"' --duration 0
bad "an unknown flag is named" '--frobnicate' --frobnicate
bad "a command without -- is refused" '"sleep"' sleep 1
"$CALIPER" sample --help >"$T/help"; rc=$?
check "--help exits 0 on stdout" [ "$rc" -eq 0 ]
check "--help shows usage" grep -q '^usage: caliper sample' "$T/help"
finish
