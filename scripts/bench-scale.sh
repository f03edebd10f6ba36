#!/usr/bin/env bash
# The scale benchmark (benches/scale.rs): N Gateways x 5 HTTPRoutes over 20 namespaces on a
# test cluster of its own, the release controller run as a separate process, and beside it
# the API server's ceiling for the same writes. Prints one report and saves it, with the
# machine, date, commit and load average, as benches/results/scale-N<N>-<date>.txt.
#
#   scripts/bench-scale.sh 100            # N = 100 (default)
#   scripts/bench-scale.sh shared 1000    # the shared-Gateway shape: one Gateway x R = 1,000
#                                         # HTTPRoutes created by 4 client threads: time to
#                                         # attachedRoutes = R, to every route Accepted, to
#                                         # Programmed with every hostname certified; status
#                                         # writes and Certificates ordered meanwhile; weight
#                                         # change -> shadow route at R routes; CPU and RSS;
#                                         # the ceiling: the controller's writes of the attach
#                                         # phase from a plain client, 8 at a time
#                                         # (saved as benches/results/shared-R<R>-<date>.txt)
#   scripts/bench-scale.sh rollout 1000   # blueprint rollouts: N Gateways (HTTPS, one route each)
#                                         # converged, then a change replacing every certificate
#                                         # rolled out in waves of 1 %, 10 %, 50 %, 100 %: time to
#                                         # complete, most Gateways not Programmed at once,
#                                         # Certificates per minute, writes per Gateway; then
#                                         # every Gateway at once under an issuance budget (250
#                                         # per 60 s, SCALE_ROLLOUT_BUDGET=<certs>/<seconds>):
#                                         # the most Certificates in any window; then a
#                                         # revision that does not render: Gateways ever not
#                                         # Programmed (saved as benches/results/rollout-N<N>-<date>.txt;
#                                         # SCALE_ROLLOUT_RUNS=1,10,50,100,budget,broken picks runs)
#   scripts/bench-scale.sh attached 1000 # the public Gateway API benchmark's attached-routes
#                                         # scenario: one Gateway (one HTTP listener, the
#                                         # Traefik class), N HTTPRoutes each with its Service
#                                         # created as fast as 4 clients can: time from the
#                                         # last create to attachedRoutes = N (add-all), from
#                                         # the last delete to 0 (remove-all), Gateway status
#                                         # writes (saved as benches/results/attached-N<N>-<date>.txt)
#   scripts/bench-scale.sh load 5000      # its route-scale scenario: N routes over 50
#                                         # namespaces, a route churned every second and a
#                                         # backend every 2 s for SCALE_LOAD_SECONDS (120):
#                                         # controller CPU (% of a core) and RSS, steady
#                                         # (saved as benches/results/load-N<N>-<date>.txt)
#   scripts/bench-scale.sh probe 3000     # its route-propagation scenario, gatewright's share:
#                                         # N routes applied one at a time, each with its own
#                                         # hostname: apply -> gatewright's copy seen by a
#                                         # watch, p50/p99 (saved as benches/results/probe-N<N>-<date>.txt)
#   scripts/bench-scale.sh routechange    # its route-change scenario, through real Traefik
#                                         # (tests/cluster/downstream up): one HTTPRoute
#                                         # re-applied every 200 ms for 20 rounds, alternating
#                                         # its backend's port and a response header filter,
#                                         # while a client sends requests back to back: requests,
#                                         # non-200 answers, errors (0 asserted), the rounds the
#                                         # dataplane served; the test `routechange` of
#                                         # tests/traffic.rs, root needed for its network
#                                         # namespace (saved as benches/results/routechange-<date>.txt)
#   SCALE_IDLE_OBJECTS=2000 scripts/bench-scale.sh 100
#                                         # also: idle RSS with 2,000 unrelated 100 KiB
#                                         # Secrets and 2,000 Services in the cluster
#
# SCALE_CONTROLLER=<path> runs another build of the controller under the same harness (for
# example an earlier commit's `target/release/gatewright`, to compare on one machine). It does
# not apply to `routechange`, whose controller runs in the test process (the test binary's
# own build of the library, as in every traffic test).
# Other knobs (environment): SCALE_CHANGES (latency samples, 200), SCALE_RESTART_SECONDS
# (120), SCALE_CONCURRENCY (client concurrency of the workload and the ceiling, 8).
# Figures are printed, never asserted, except by `routechange`, a test (its exit status is
# the test's). Not part of scripts/test.sh (minutes per run).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
shape=scale
if [ "${1:-}" = routechange ]; then
  shape=routechange
  shift
  n=""
elif [ "${1:-}" = shared ] || [ "${1:-}" = rollout ] || [ "${1:-}" = attached ] || [ "${1:-}" = load ] || [ "${1:-}" = probe ]; then
  shape="$1"
  shift
  n="${1:-1000}"
else
  n="${1:-100}"
fi
if [ "$shape" = routechange ]; then
  [ -z "${SCALE_CONTROLLER:-}" ] || echo "bench-scale: SCALE_CONTROLLER does not apply to routechange (the controller runs in the test process)" >&2
  cargo test --features cluster-tests --test traffic --no-run
else
  case "$n" in '' | *[!0-9]*) echo "bench-scale: N must be a number, got '$n'" >&2; exit 2 ;; esac
  controller="${SCALE_CONTROLLER:-$root/target/release/gatewright}"
  [ -n "${SCALE_CONTROLLER:-}" ] || cargo build --release --bin gatewright
  [ -x "$controller" ] || { echo "bench-scale: no controller binary at $controller" >&2; exit 2; }
  cargo bench --features cluster-tests --bench scale --no-run
fi

GATEWRIGHT_CLUSTER_DIR="$(mktemp -d -t gatewright-scale.XXXXXX)"
export GATEWRIGHT_CLUSTER_DIR
cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  tests/cluster/down >&2 || rc=1
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
env_line="$(tests/cluster/up)"
eval "$env_line"
export KUBECONFIG

mkdir -p benches/results
if [ "$shape" = routechange ]; then
  # Real Traefik, cert-manager and external-dns beside the cluster (tests/cluster/down stops them).
  tests/cluster/downstream up >&2
  out="benches/results/routechange-$(date -u +%Y%m%dT%H%M%SZ).txt"
elif [ "$shape" = shared ]; then
  out="benches/results/shared-R${n}-$(date -u +%Y%m%dT%H%M%SZ).txt"
elif [ "$shape" = rollout ] || [ "$shape" = attached ] || [ "$shape" = load ] || [ "$shape" = probe ]; then
  out="benches/results/${shape}-N${n}-$(date -u +%Y%m%dT%H%M%SZ).txt"
else
  out="benches/results/scale-N${n}-$(date -u +%Y%m%dT%H%M%SZ).txt"
fi
{
  echo "# scripts/bench-scale.sh $([ "$shape" != scale ] && echo "$shape${n:+ }")$n"
  echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  # (Its file name and version only: the saved report carries no path of this machine.)
  [ -z "${SCALE_CONTROLLER:-}" ] || [ "$shape" = routechange ] || echo "# controller: SCALE_CONTROLLER=.../$(basename "$controller") ($("$controller" --version 2>/dev/null || echo 'version unknown'))"
  echo "# machine: $(uname -srm), $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out"
if [ "$shape" = routechange ]; then
  cargo test --features cluster-tests --test traffic routechange -- --nocapture 2>&1 \
    | grep --line-buffered -v '^\s*\(Finished\|Running\|Compiling\)\|^\s*$' | tee -a "$out"
else
  SCALE_SHAPE="$shape" SCALE_GATEWAYS="$n" SCALE_ROUTES="$n" SCALE_CONTROLLER="$controller" \
    cargo bench --features cluster-tests --bench scale 2>&1 | grep --line-buffered -v '^\s*\(Finished\|Running\|Compiling\)' | tee -a "$out"
fi
echo "# saved as $out" >&2
