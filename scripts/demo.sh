#!/usr/bin/env bash
# The main job: brings the local Kubernetes control plane up, installs our CRDs and the
# shipped GatewayClasses, starts the real cert-manager and external-dns beside it (acting
# in the quickstart's Gateway namespace, `infra`: tests/cluster/downstream), runs the
# controller, applies the quickstart (a Gateway and two HTTPRoutes in other namespaces),
# plays Istio's part only (the child Gateway's address and Programmed status: Istio needs a
# data plane), and prints what was created, the status, the certificate cert-manager
# issued and the records external-dns published. Then a request answered for real: a
# Gateway of the traefik-certmanager-externaldns class, served by Traefik (a process beside
# the cluster, started by tests/cluster/downstream), and a route to a backend process, sent
# over HTTPS and answered with the certificate cert-manager issued (DEMO_TRAEFIK=0 leaves
# this out: Traefik's first build takes about 10 minutes on a fresh machine, and the backend
# needs root, for its network namespace). Keeps running until Ctrl-C (or exits after
# printing with --once); always leaves nothing behind.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
once=false
[ "${1:-}" = "--once" ] && once=true

cargo build --quiet --bin gatewright
gw="${CARGO_TARGET_DIR:-$root/target}/debug/gatewright"
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
# in the quickstart Gateway's namespace, where its Certificate and DNSEndpoint are made, and
# Traefik (unless DEMO_TRAEFIK=0; built once and cached, as the test command does).
traefik=${DEMO_TRAEFIK:-1}
if [ "$traefik" != 0 ] && [ "$(id -u)" != 0 ]; then
  echo "demo: not root: leaving Traefik out (its backend needs a network namespace)" >&2
  traefik=0
fi
DOWNSTREAM_TRAEFIK=$traefik DOWNSTREAM_NAMESPACE=infra DOWNSTREAM_ZONES=example.com tests/cluster/downstream up
kubectl create namespace gatewright-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply --server-side -f gatewayclasses/istio-certmanager-externaldns/ -f gatewayclasses/traefik-certmanager-externaldns/ \
  -f gatewayclasses/contour-istio/ -f gatewayclasses/aws-alb-crossplane/ >/dev/null
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
# Plays Istio's part on the Istio child Gateway (what `gatewright simulate-ready` writes for
# it): an address and Programmed for its current generation. The Certificate and the
# DNSEndpoint are cert-manager's and external-dns's own; a Traefik child is Traefik's.
program_istio() {
  kubectl -n infra get gateways.gateway.networking.k8s.io -l app.kubernetes.io/managed-by=gatewright \
    -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.generation} {.spec.gatewayClassName}{"\n"}{end}' |
  while read -r name generation class; do
    [ "$class" = istio ] || continue
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

if [ "$traefik" != 0 ]; then
  echo
  echo "==> a request through Traefik: Gateway infra/edge (class traefik-certmanager-externaldns), HTTPRoute shop/hello"
  envfile="$GATEWRIGHT_CLUSTER_DIR/downstream.env"
  web_port=$(sed -n 's/^traefik_web_port=//p' "$envfile")
  websecure_port=$(sed -n 's/^traefik_websecure_port=//p' "$envfile")
  traefik_class=$(sed -n 's/^traefik_gateway_class=//p' "$envfile")
  # The backend, a "pod" as a process (tests/traffic/echo.py: it answers with its name and
  # the request) on its own address in a network namespace of the demo's own (the API server
  # refuses loopback addresses in EndpointSlices); recorded where `downstream down` removes
  # it with its processes.
  netns=gwdemo-$$ host_if=gwd$$h ns_if=gwd$$n
  used="$(ip -4 -o addr show) $(ip -4 route show)"
  for c in $(seq 254 -1 200); do
    case "$used" in *" 198.19.$c."*) ;; *) break ;; esac
  done
  mkdir -p "$GATEWRIGHT_CLUSTER_DIR/netns"
  echo "$host_if" >"$GATEWRIGHT_CLUSTER_DIR/netns/$netns"
  ip netns add "$netns"
  ip link add "$host_if" type veth peer name "$ns_if"
  ip link set "$ns_if" netns "$netns"
  ip addr add "198.19.$c.1/24" dev "$host_if"
  ip link set "$host_if" up
  ip -n "$netns" link set lo up
  ip -n "$netns" addr add "198.19.$c.10/24" dev "$ns_if"
  ip -n "$netns" link set "$ns_if" up
  coproc echo_backend { exec ip netns exec "$netns" python3 tests/traffic/echo.py hello "198.19.$c.10" 8080; }
  read -r ready <&"${echo_backend[0]}"
  [ "$ready" = ready ] || { echo "demo: the backend did not start" >&2; exit 1; }
  # The platform team's settings for the Traefik class: the GatewayClass Traefik serves, the
  # ports of its entrypoints here for the listeners' 80 and 443, and the CA Issuer.
  kubectl apply --server-side -f - >/dev/null <<YAML
apiVersion: gatewright.dev/v1alpha1
kind: GatewayClassConfig
metadata: {name: demo-traefik, namespace: gatewright-system}
spec:
  targetRef: {group: gateway.networking.k8s.io, kind: GatewayClass, name: traefik-certmanager-externaldns}
  default:
    traefik:
      gatewayClassName: $traefik_class
      ports: {"80": $web_port, "443": $websecure_port}
    certificate:
      issuerRef: {group: cert-manager.io, kind: Issuer, name: gatewright-ca}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: infra}
spec:
  gatewayClassName: traefik-certmanager-externaldns
  listeners:
  - {name: http, port: 80, protocol: HTTP, hostname: "*.example.com", allowedRoutes: {namespaces: {from: All}}}
  - name: https
    port: 443
    protocol: HTTPS
    hostname: "*.example.com"
    allowedRoutes: {namespaces: {from: All}}
    tls: {mode: Terminate, options: {gatewright.dev/certificate: generated}}
---
apiVersion: v1
kind: Service
metadata: {name: hello, namespace: shop}
spec: {ports: [{name: http, port: 8080, targetPort: 8080, protocol: TCP}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: hello-1, namespace: shop, labels: {kubernetes.io/service-name: hello}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints: [{addresses: ["198.19.$c.10"], conditions: {ready: true, serving: true, terminating: false}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: hello, namespace: shop}
spec:
  parentRefs: [{name: edge, namespace: infra}]
  hostnames: [hello.example.com]
  rules:
  - filters:
    - {type: ResponseHeaderModifier, responseHeaderModifier: {set: [{name: x-served-through, value: traefik}]}}
    backendRefs: [{name: hello, port: 8080}]
YAML
  edge_programmed() { kubectl -n infra get gateway edge -o jsonpath='{.status.conditions[?(@.type=="Programmed")].status}' 2>/dev/null; }
  for _ in $(seq 1 60); do [ "$(edge_programmed)" = True ] && break; sleep 1; done
  echo "Gateway infra/edge Programmed=$(edge_programmed) (Traefik's own status on infra/edge-traefik: $(kubectl -n infra get gateway edge-traefik -o jsonpath='{.status.conditions[?(@.type=="Programmed")].message}'))"
  kubectl -n infra get secret gatewright-ca -o jsonpath='{.data.tls\.crt}' | base64 -d >"$GATEWRIGHT_CLUSTER_DIR/demo-ca.crt"
  hello() {
    curl -sS --fail --max-time 5 --cacert "$GATEWRIGHT_CLUSTER_DIR/demo-ca.crt" \
      --resolve "hello.example.com:$websecure_port:127.0.0.1" -H "Host: hello.example.com" "$@" \
      "https://hello.example.com:$websecure_port/greeting"
  }
  # Traefik applies a new configuration after its providers' throttle (2 s).
  for _ in $(seq 1 30); do hello -o /dev/null 2>/dev/null && break; sleep 1; done
  echo "\$ curl --cacert <the CA issuer's certificate> https://hello.example.com/greeting   (to Traefik's websecure entrypoint, 127.0.0.1:$websecure_port)"
  hello -i | tr -d '\r'
  echo
  echo "the certificate Traefik showed for hello.example.com:"
  openssl s_client -connect "127.0.0.1:$websecure_port" -servername hello.example.com \
    -CAfile "$GATEWRIGHT_CLUSTER_DIR/demo-ca.crt" </dev/null 2>/dev/null |
    openssl x509 -noout -subject -issuer -ext subjectAltName
fi
echo
echo "KUBECONFIG=$KUBECONFIG   controller log: $GATEWRIGHT_CLUSTER_DIR/controller.log (kept as target/demo-controller.log on exit)"
if $once; then exit 0; fi
echo "Running. Edit the quickstart with kubectl and watch the children follow (cert-manager and"
echo "external-dns for real, Istio's part still played here; Traefik's for real). Ctrl-C to stop and clean up."
while kill -0 "$ctl_pid" 2>/dev/null; do
  program_istio
  sleep 1
done
wait "$ctl_pid"
