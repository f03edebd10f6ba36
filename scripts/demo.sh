#!/usr/bin/env bash
# The main job: brings the local Kubernetes control plane up, installs our CRDs and the
# shipped GatewayClasses, starts the real cert-manager and external-dns beside it (acting
# in the quickstart's Gateway namespace, `infra`: tests/cluster/downstream), runs the
# controller, applies the quickstart (a Gateway and two HTTPRoutes in other namespaces),
# plays Istio's part only (the child Gateway's address and Programmed status: Istio needs a
# data plane), and prints what was created, the status, the certificate cert-manager
# issued and the records external-dns published. Keeps running until Ctrl-C (or exits after
# printing with --once); always leaves nothing behind.
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
  cp "$GATEWRIGHT_CLUSTER_DIR/external-dns.log" "$root/target/demo-external-dns.log" 2>/dev/null || true
  tests/cluster/downstream down || true
  tests/cluster/down || true
}
trap cleanup EXIT INT TERM

env_line="$(tests/cluster/up)"   # also installs config/crd/ and the children's CRDs
eval "$env_line"
export KUBECONFIG
# The kubectl built with the cluster (same version as the server; none needed on the machine).
export PATH="$root/tests/cluster/bin:$PATH"
# cert-manager (with a CA Issuer `gatewright-ca`) and external-dns (zone example.com), both
# in the quickstart Gateway's namespace, where its Certificate and DNSEndpoint are made.
# Not Traefik (DOWNSTREAM_TRAEFIK=0): the quickstart's class plays Istio's part here, and
# Traefik's first build would add about 10 minutes to a fresh machine's first demo.
DOWNSTREAM_TRAEFIK=0 DOWNSTREAM_NAMESPACE=infra DOWNSTREAM_ZONES=example.com tests/cluster/downstream up
kubectl create namespace gatewright-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply --server-side -f gatewayclasses/istio-certmanager-externaldns/ -f gatewayclasses/contour-istio/ -f gatewayclasses/aws-alb-crossplane/ >/dev/null
# The platform team's setting: the class's Certificates come from that CA Issuer.
kubectl apply --server-side -f - >/dev/null <<'YAML'
apiVersion: gatewright.dev/v1alpha1
kind: GatewayClassConfig
metadata: {name: demo-issuer, namespace: gatewright-system}
spec:
  targetRef: {group: gateway.networking.k8s.io, kind: GatewayClass, name: istio-certmanager-externaldns}
  default:
    certificate:
      issuerRef: {group: cert-manager.io, kind: Issuer, name: gatewright-ca}
YAML

"$gw" run --metrics-addr 127.0.0.1:0 > "$GATEWRIGHT_CLUSTER_DIR/controller.log" 2>&1 &
ctl_pid=$!
kubectl apply --server-side -f examples/quickstart/quickstart.yaml >/dev/null

programmed() { kubectl -n infra get gateway public -o jsonpath='{.status.conditions[?(@.type=="Programmed")].status}' 2>/dev/null; }
# Plays Istio's part on the child Gateway (what `gatewright simulate-ready` writes for it):
# an address and Programmed for its current generation. The Certificate and the DNSEndpoint
# are cert-manager's and external-dns's own.
program_istio() {
  kubectl -n infra get gateways.gateway.networking.k8s.io -l app.kubernetes.io/managed-by=gatewright \
    -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.generation}{"\n"}{end}' |
  while read -r name generation; do
    kubectl -n infra patch gateways.gateway.networking.k8s.io "$name" --subresource status --type merge -p "$(cat <<JSON
{"status": {"addresses": [{"type": "IPAddress", "value": "192.0.2.10"}], "conditions": [
  {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "simulated", "observedGeneration": $generation, "lastTransitionTime": "2026-01-01T00:00:00Z"},
  {"type": "Programmed", "status": "True", "reason": "Programmed", "message": "simulated", "observedGeneration": $generation, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
JSON
)" >/dev/null || true
  done
}
echo "==> waiting for the children (Programmed=$(programmed || true) until cert-manager, external-dns and (simulated) Istio report ready)"
for _ in $(seq 1 60); do
  [ "$(programmed)" = "True" ] && break
  program_istio
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
secret=$(kubectl -n infra get certificates.cert-manager.io -l app.kubernetes.io/managed-by=gatewright -o jsonpath='{.items[0].spec.secretName}')
echo "==> the certificate cert-manager issued (Secret infra/$secret)"
kubectl -n infra get secret "$secret" -o jsonpath='{.data.tls\.crt}' | base64 -d | openssl x509 -noout -subject -issuer -ext subjectAltName
echo
echo "==> the records external-dns published to its in-memory zone example.com ($GATEWRIGHT_CLUSTER_DIR/external-dns.log)"
records() { grep -E 'msg="(CREATE|UPDATE \((old|new)\)|DELETE): ' "$GATEWRIGHT_CLUSTER_DIR/external-dns.log" | sed 's/.*msg="\(.*\)"$/\1/; s/\\"/"/g'; }
for _ in $(seq 1 50); do records | grep -q ' IN A ' && break; sleep 0.2; done
records
echo
echo "KUBECONFIG=$KUBECONFIG   controller log: $GATEWRIGHT_CLUSTER_DIR/controller.log (kept as target/demo-controller.log on exit)"
if $once; then exit 0; fi
echo "Running. Edit the quickstart with kubectl and watch the children follow (cert-manager and"
echo "external-dns for real, Istio's part still played here). Ctrl-C to stop and clean up."
while kill -0 "$ctl_pid" 2>/dev/null; do
  program_istio
  sleep 1
done
wait "$ctl_pid"
