#!/usr/bin/env bash
# The main job: brings the local Kubernetes control plane up, installs our CRDs and the
# shipped GatewayClasses, runs the controller, applies the quickstart (a Gateway and two
# HTTPRoutes in other namespaces), plays the downstream controllers' part by marking
# the children ready, and prints what was created and the status. Keeps running until
# Ctrl-C (or exits after printing with --once); always leaves nothing behind.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
once=false
[ "${1:-}" = "--once" ] && once=true

cargo build --quiet --bin gatewright
gw="$root/target/debug/gatewright"
export GATEWRIGHT_CLUSTER_DIR="${GATEWRIGHT_CLUSTER_DIR:-$(mktemp -d)}"
ctl_pid=""
cleanup() {
  [ -n "$ctl_pid" ] && kill "$ctl_pid" 2>/dev/null && wait "$ctl_pid" 2>/dev/null
  cp "$GATEWRIGHT_CLUSTER_DIR/controller.log" "$root/target/demo-controller.log" 2>/dev/null || true
  tests/cluster/down || true
}
trap cleanup EXIT INT TERM

env_line="$(tests/cluster/up)"   # also installs config/crd/ and the children's CRDs
eval "$env_line"
export KUBECONFIG
# The kubectl built with the cluster (same version as the server; none needed on the machine).
export PATH="$root/tests/cluster/bin:$PATH"
kubectl create namespace gatewright-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply --server-side -f gatewayclasses/istio-certmanager-externaldns/ -f gatewayclasses/contour-istio/ -f gatewayclasses/aws-alb-crossplane/ >/dev/null

"$gw" run --metrics-addr 127.0.0.1:0 > "$GATEWRIGHT_CLUSTER_DIR/controller.log" 2>&1 &
ctl_pid=$!
kubectl apply --server-side -f examples/quickstart/quickstart.yaml >/dev/null

programmed() { kubectl -n infra get gateway public -o jsonpath='{.status.conditions[?(@.type=="Programmed")].status}' 2>/dev/null; }
echo "==> waiting for the children (Programmed=$(programmed || true) until downstream controllers report ready)"
for _ in $(seq 1 60); do
  [ "$(programmed)" = "True" ] && break
  "$gw" simulate-ready >/dev/null
  sleep 1
done

echo
echo "==> children gatewright created"
kubectl get certificates.cert-manager.io,gateways.gateway.networking.k8s.io,httproutes.gateway.networking.k8s.io,dnsendpoints.externaldns.k8s.io \
  -A -l app.kubernetes.io/managed-by=gatewright
echo
echo "==> Gateway infra/public"
kubectl -n infra get gateway public -o jsonpath='{range .status.conditions[*]}{.type}={.status} ({.reason}): {.message}{"\n"}{end}addresses: {.status.addresses[*].value}{"\n"}{range .status.listeners[*]}listener {.name}: attachedRoutes={.attachedRoutes}{"\n"}{end}'
echo
for r in shop/storefront blog/blog; do
  echo "==> HTTPRoute $r"
  kubectl -n "${r%/*}" get httproute "${r#*/}" -o jsonpath='{range .status.parents[*]}{.controllerName} -> {.parentRef.namespace}/{.parentRef.name}: {range .conditions[*]}{.type}={.status} ({.reason}) {end}{"\n"}{end}'
done
echo
echo "KUBECONFIG=$KUBECONFIG   controller log: $GATEWRIGHT_CLUSTER_DIR/controller.log (kept as target/demo-controller.log on exit)"
if $once; then exit 0; fi
echo "Running. Edit the quickstart with kubectl and watch the children follow. Ctrl-C to stop and clean up."
wait "$ctl_pid"
