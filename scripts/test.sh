#!/usr/bin/env bash
# The project's test command: format and lint gates, then every test (unit, golden,
# render, and the cluster tests against a real kube-apiserver built from source), with
# the local cluster brought up for the run and always brought down again.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

echo "==> cargo fmt --check"
cargo fmt --check
echo "==> cargo clippy"
cargo clippy --all-targets --features cluster-tests -- -D warnings

echo "==> test cluster"
tests/cluster/build
export GATEWRIGHT_CLUSTER_DIR="$(mktemp -d)"
cleanup() { tests/cluster/down || true; }
trap cleanup EXIT INT TERM
eval "$(tests/cluster/up)"
echo "KUBECONFIG=$KUBECONFIG"

echo "==> cargo test"
cargo test --features cluster-tests

# conformance: the Gateway API conformance run joins here.
