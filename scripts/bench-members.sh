#!/usr/bin/env bash
# Which fleet member is lighter on this machine: a control plane with an etcd of its own, or
# one keeping its objects in a shared etcd under a prefix of its own
# (GATEWRIGHT_CLUSTER_ETCD, see tests/cluster/README.md)? For each way it starts
# BENCH_MEMBERS members (default 3) one after the other, then prints per member: the time
# `up` took, the resident memory of its processes once idle (for the shared way, its own
# processes plus its share of what the shared etcd grew by), and the CPU they spent idle over
# BENCH_IDLE_SECONDS (default 20). Saves the report as benches/results/members-<date>.txt.
# Figures are printed, never asserted. Not part of scripts/test.sh (about a minute).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
members="${BENCH_MEMBERS:-3}"
idle="${BENCH_IDLE_SECONDS:-20}"
tests/cluster/build >&2

dirs=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  # Sharing members before the cluster whose etcd they share: newest first.
  for ((i = ${#dirs[@]} - 1; i >= 0; i--)); do
    GATEWRIGHT_CLUSTER_DIR="${dirs[$i]}" tests/cluster/down >&2 || rc=1
    rm -rf "${dirs[$i]}"
  done
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

new_dir() { local d; d="$(mktemp -d -t gatewright-members.XXXXXX)"; dirs+=("$d"); echo "$d"; }
pids_of() { awk '{print $2}' "$1/pids"; }
# Resident memory (KiB) and CPU ticks of the given pids, summed.
rss_kib() { local t=0 p; for p in "$@"; do t=$((t + $(awk '/^VmRSS:/ {print $2}' "/proc/$p/status"))); done; echo "$t"; }
ticks() { local t=0 p f; for p in "$@"; do f=$(cat "/proc/$p/stat"); f=${f##*) }; read -r -a a <<<"$f"; t=$((t + a[11] + a[12])); done; echo "$t"; }
hz="$(getconf CLK_TCK)"
up_member() { # dir, extra env... ; prints the seconds `up` took
  local d="$1" began; shift
  began=$(date +%s%N)
  env GATEWRIGHT_CLUSTER_DIR="$d" "$@" tests/cluster/up >/dev/null 2>>"$d.up.log"
  python3 -c "print(f'{($(date +%s%N) - $began) / 1e9:.2f}')"
}

mkdir -p benches/results
out="benches/results/members-$(date -u +%Y%m%dT%H%M%SZ).txt"
{
  echo "# scripts/bench-members.sh (BENCH_MEMBERS=$members BENCH_IDLE_SECONDS=$idle)"
  echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "# machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"

  # 1. Each member with an etcd of its own.
  own=()
  times=()
  for _ in $(seq 1 "$members"); do
    d="$(new_dir)"; own+=("$d")
    times+=("$(up_member "$d")")
  done
  all=(); for d in "${own[@]}"; do mapfile -t -O "${#all[@]}" all < <(pids_of "$d"); done
  t0=$(ticks "${all[@]}"); sleep "$idle"; t1=$(ticks "${all[@]}")
  rss=$(rss_kib "${all[@]}")
  echo "own etcd:    up ${times[*]} s; per member $(python3 -c "print(f'{$rss / 1024 / $members:.1f}')") MiB resident (etcd, kube-apiserver, kube-controller-manager), idle CPU $(python3 -c "print(f'{($t1 - $t0) / $hz / $idle / $members * 100:.2f}')") % of a core"
  for ((i = ${#own[@]} - 1; i >= 0; i--)); do GATEWRIGHT_CLUSTER_DIR="${own[$i]}" tests/cluster/down >&2; done
  dirs=()

  # 2. One etcd (a cluster of its own, not counted), members keeping their objects in it.
  base="$(new_dir)"
  up_member "$base" >/dev/null
  etcd_pid=$(awk '$1 == "etcd" {print $2}' "$base/pids")
  etcd_before=$(rss_kib "$etcd_pid")
  times=()
  shared=()
  for _ in $(seq 1 "$members"); do
    d="$(new_dir)"; shared+=("$d")
    times+=("$(up_member "$d" GATEWRIGHT_CLUSTER_ETCD="$(cat "$base/etcd-url")")")
  done
  all=(); for d in "${shared[@]}"; do mapfile -t -O "${#all[@]}" all < <(pids_of "$d"); done
  e0=$(ticks "$etcd_pid"); t0=$(ticks "${all[@]}"); sleep "$idle"; t1=$(ticks "${all[@]}"); e1=$(ticks "$etcd_pid")
  base_idle=$(( e1 - e0 ))
  rss=$(rss_kib "${all[@]}")
  etcd_after=$(rss_kib "$etcd_pid")
  echo "shared etcd: up ${times[*]} s; per member $(python3 -c "print(f'{($rss + $etcd_after - $etcd_before) / 1024 / $members:.1f}')") MiB resident (kube-apiserver, kube-controller-manager, and a share of the etcd's growth: $(python3 -c "print(f'{($etcd_after - $etcd_before) / 1024:.1f}')") MiB over $members members), idle CPU $(python3 -c "print(f'{($t1 - $t0 + $base_idle * $members / ($members + 1)) / $hz / $idle / $members * 100:.2f}')") % of a core (with a share of the etcd's, which also serves its own cluster)"
} | tee "$out"
echo "saved $out" >&2
