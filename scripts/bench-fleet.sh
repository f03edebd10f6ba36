#!/usr/bin/env bash
# The fleet benchmark (benches/fleet.rs): a hub and a member cluster of its own, the release
# controller run on the hub with --fleet as a separate process. Prints the memory per idle
# member and per Gateway in a member, the watches an idle member opens, and the time from a
# member's ClusterProfile turning healthy to its children; saves the report, with the
# machine, date, commit and load average, as benches/results/fleet-<date>.txt.
#
#   scripts/bench-fleet.sh                 # 20 idle members, 100 Gateways in one member
#   FLEET_MEMBERS=50 FLEET_GATEWAYS=300 scripts/bench-fleet.sh
#   FLEET_SCALE_MEMBERS=3 FLEET_SCALE_GATEWAYS=300 scripts/bench-fleet.sh
#                                          # then 3 more members (control planes of their
#                                          # own) with 300 Gateways each: cold convergence
#                                          # against the ceiling, steady-state and restart
#                                          # writes (benches/fleet.rs, step 5)
#   FLEET_CONTROLLER_ARGS="--workers 24" ...   # extra flags for the controller, to compare
#
# Figures are printed, never asserted. Not part of scripts/test.sh (a few minutes).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

cargo build --release --bin gatewright
cargo bench --features cluster-tests --bench fleet --no-run

hub="$(mktemp -d -t gatewright-fleet-hub.XXXXXX)"
member="$(mktemp -d -t gatewright-fleet-member.XXXXXX)"
scale_dirs=()
for _ in $(seq 1 "${FLEET_SCALE_MEMBERS:-0}"); do
  scale_dirs+=("$(mktemp -d -t gatewright-fleet-scale.XXXXXX)")
done
cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  for d in "${scale_dirs[@]}"; do
    GATEWRIGHT_CLUSTER_DIR="$d" tests/cluster/down >&2 || rc=1
    rm -rf "$d"
  done
  GATEWRIGHT_CLUSTER_DIR="$member" tests/cluster/down >&2 || rc=1
  GATEWRIGHT_CLUSTER_DIR="$hub" tests/cluster/down >&2 || rc=1
  rm -rf "$hub" "$member"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
GATEWRIGHT_CLUSTER_DIR="$member" tests/cluster/up >/dev/null
scale_kubeconfigs=""
for d in "${scale_dirs[@]}"; do
  GATEWRIGHT_CLUSTER_DIR="$d" tests/cluster/up >/dev/null
  scale_kubeconfigs="${scale_kubeconfigs:+$scale_kubeconfigs:}$d/admin.kubeconfig"
done
env_line="$(GATEWRIGHT_CLUSTER_DIR="$hub" tests/cluster/up)"
eval "$env_line"
export KUBECONFIG

mkdir -p benches/results
out="benches/results/fleet-$(date -u +%Y%m%dT%H%M%SZ).txt"
{
  echo "# scripts/bench-fleet.sh (FLEET_MEMBERS=${FLEET_MEMBERS:-20} FLEET_GATEWAYS=${FLEET_GATEWAYS:-100} FLEET_SCALE_MEMBERS=${FLEET_SCALE_MEMBERS:-0} FLEET_SCALE_GATEWAYS=${FLEET_SCALE_GATEWAYS:-300})"
  [ -z "${FLEET_CONTROLLER_ARGS:-}" ] || echo "# FLEET_CONTROLLER_ARGS=\"$FLEET_CONTROLLER_ARGS\""
  echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "# machine: $(uname -srm), $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out"
FLEET_CONTROLLER="$root/target/release/gatewright" FLEET_MEMBER_KUBECONFIG="$member/admin.kubeconfig" \
  FLEET_SCALE_KUBECONFIGS="$scale_kubeconfigs" \
  cargo bench --features cluster-tests --bench fleet 2>&1 | grep --line-buffered -v '^\s*\(Finished\|Running\|Compiling\)' | tee -a "$out"
echo "# saved as $out" >&2
