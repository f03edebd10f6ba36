#!/usr/bin/env bash
# Prints the manifest files the test cluster installs, one path per line, in order:
#  - real CRDs read from the Go modules that ship them: `go mod download -json` fetches each
#    pinned module through the Go module proxy into the module cache (checked against the
#    checksum database) and reports its directory; later runs read the cache, offline;
#  - the minimal CRDs under tests/cluster/crds/, for kinds whose upstream module the proxy
#    does not serve;
#  - the project's own CRDs under config/crd/, when that folder exists.
# README.md lists which CRDs are real and which are minimal.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

GATEWAY_API=sigs.k8s.io/gateway-api@v1.7.0
CERT_MANAGER=github.com/cert-manager/cert-manager@v1.21.2
ISTIO_API=istio.io/api@v1.31.1
EXTERNAL_DNS=sigs.k8s.io/external-dns@v0.20.0
# AWS Load Balancer Controller: its module path (sigs.k8s.io/aws-load-balancer-controller)
# has no /v3 suffix, so its v3 tags are not Go versions and only pseudo-versions can be had;
# this one is a commit whose helm/aws-load-balancer-controller/Chart.yaml says appVersion v3.2.2.
AWS_LBC=github.com/kubernetes-sigs/aws-load-balancer-controller@v0.0.0-20260423195125-93ff3b5fdaad

# Run outside any Go module so the downloads never touch tests/cluster/go.sum.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
moddir() {
  local json field dir zip version
  # Exits non-zero when the JSON carries an Error; the JSON says what happened.
  json=$(cd "$scratch" && GOFLAGS='' GOTOOLCHAIN=local go mod download -json "$1" 2>/dev/null) || true
  field() { sed -n "s/^\s*\"$1\": \"\(.*\)\",\?$/\1/p" <<<"$json"; }
  dir=$(field Dir)
  if [ -z "$dir" ] && [[ "$(field Error)" == *"requires go "* ]] && [ -n "$(field Sum)" ]; then
    # The module's go.mod asks for a newer Go than this machine's (gateway-api v1.7.0 says
    # go 1.27.0). go mod download has still fetched, verified (Sum) and extracted it, but
    # reports no Dir: that is the zip's path in the download cache without cache/download/
    # and /@v/<version>.zip. Only YAML is read from it; no Go code is built.
    zip=$(field Zip)
    version=$(field Version)
    dir="${zip%%/cache/download/*}/${zip#*/cache/download/}"
    dir="${dir%/@v/*}@$version"
  fi
  [ -n "$dir" ] && [ -d "$dir" ] || {
    echo "error: go mod download $1 failed${json:+: $(field Error)}" >&2
    return 1
  }
  echo "$dir"
}
need() { # every listed file must exist: a version bump that moves a file fails loudly
  local f
  for f in "$@"; do
    [ -f "$f" ] || { echo "error: $f not found" >&2; return 1; }
    echo "$f"
  done
}

d=$(moddir "$GATEWAY_API")
# Standard channel: the CRDs and the ValidatingAdmissionPolicy (+ binding) shipped with them.
need "$d"/config/crd/standard/gateway.networking.k8s.io_*.yaml
d=$(moddir "$CERT_MANAGER")
need "$d"/deploy/crds/cert-manager.io_{certificates,certificaterequests,issuers,clusterissuers}.yaml
d=$(moddir "$ISTIO_API")
need "$d/kubernetes/customresourcedefinitions.gen.yaml"
d=$(moddir "$EXTERNAL_DNS")
need "$d/config/crd/standard/dnsendpoints.externaldns.k8s.io.yaml"
d=$(moddir "$AWS_LBC")
need "$d/config/crd/bases/elbv2.k8s.aws_targetgroupbindings.yaml"
need "$here"/crds/*.yaml
if [ -d "$root/config/crd" ]; then
  # kustomization.yaml is kustomize's (config/default), not a manifest.
  find "$root/config/crd" -type f \( -name '*.yaml' -o -name '*.yml' \) ! -name 'kustomization.y*ml' | sort
fi
