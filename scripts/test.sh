#!/usr/bin/env bash
# The project's test command (README.md; .ci/run runs it): the format and lint gates, then
# every test (unit, golden, render, the cluster tests against a real kube-apiserver
# built from source by tests/cluster, and the install tests of the image, the Helm chart
# and the kustomize base), with a fresh local cluster brought up for the run in
# a temporary directory and always brought down again, on success, failure or Ctrl-C.
#
# Needs Rust (with rustfmt and clippy) and Go; the cluster's binaries and CRDs, promtool
# (tests/tools/promtool), the CEL evaluator (tests/tools/celeval), cert-manager and
# external-dns (tests/tools/cert-manager, tests/tools/external-dns: the real downstream
# controllers tests/real_downstream.rs runs against; external-dns also reads, and so drains,
# every other test's DNSEndpoints), Traefik (tests/tools/traefik: the dataplane
# tests/traffic.rs and the conformance traffic run send requests through), Flagger
# (tests/tools/flagger: the canary of tests/traffic.rs) and the conformance suite's echo
# backend (tests/conformance/build-echo: the Pods tests/cluster/kubelet.py runs) come from
# the Go module proxy on first
# use (tests/cluster/README.md); lua5.1 from Debian's packages (installed by
# tests/health/run when missing and run as root).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

step() { echo "==> $*"; }
began=$(date +%s)

step "cargo fmt --check"
cargo fmt --check

step "cargo clippy --all-targets --features cluster-tests -- -D warnings"
cargo clippy --all-targets --features cluster-tests -- -D warnings

step "test cluster binaries (tests/cluster/build)"
tests/cluster/build

step "real downstream controllers and dataplane: cert-manager v1.11.5, external-dns v0.20.0, Traefik v3.6.19, Flagger v1.36.1, the conformance suite's echo backend (tests/tools/{cert-manager,external-dns,traefik,flagger}/build, tests/conformance/build-echo)"
tests/tools/cert-manager/build
tests/tools/external-dns/build
tests/tools/traefik/build
tests/tools/flagger/build
tests/conformance/build-echo

step "alert rules and dashboard queries (tests/monitoring/check: promtool check rules, test rules)"
tests/monitoring/check

step "test cluster up"
GATEWRIGHT_CLUSTER_DIR="$(mktemp -d -t gatewright-cluster.XXXXXX)"
export GATEWRIGHT_CLUSTER_DIR
cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  step "real downstream controllers and test cluster down"
  tests/cluster/downstream down || rc=1
  tests/cluster/down || rc=1
  echo "==> done in $(( $(date +%s) - began ))s (exit $rc)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
# An assignment, not `eval "$(...)"`, so that a failed `up` stops the script. The API
# server writes an audit log of every write (tests/e2e/writes.rs reads who sent each).
env_line="$(GATEWRIGHT_CLUSTER_AUDIT=1 tests/cluster/up)"
eval "$env_line"
export KUBECONFIG
echo "KUBECONFIG=$KUBECONFIG"

step "real cert-manager (namespace gatewright-real), external-dns (every namespace), Traefik (GatewayClass traefik), the kubelet stand-in and Flagger beside the cluster (tests/cluster/downstream up)"
tests/cluster/downstream up

step "cargo test --features cluster-tests"
# The fault tests (tests/faults) restart this cluster's API server and etcd: a binary of
# their own: cargo runs test binaries one at a time, so none runs beside them.
rm -f target/tmp/faults-report.txt
cargo test --features cluster-tests

step "fault figures (tests/faults)"
cat target/tmp/faults-report.txt 2>/dev/null || echo "(none recorded)"

step "GitOps health checks: Argo CD Lua and Flux CEL on captured statuses (tests/health/run)"
GATEWRIGHT="$root/target/debug/gatewright" tests/health/run

step "our CRDs and their validation on the oldest supported Kubernetes, 1.32 (tests/cluster/oldest/check-crds)"
tests/cluster/oldest/check-crds

step "Gateway API conformance v1.7.0: status-only tests, then the traffic tests through the shipped Traefik class (tests/conformance/run)"
GATEWRIGHT="$root/target/debug/gatewright" tests/conformance/run

step "install: image, Helm chart, kustomize base (tests/install/run)"
tests/install/run
