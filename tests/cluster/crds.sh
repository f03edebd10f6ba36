#!/usr/bin/env bash
# Prints the CRD files the test cluster installs, one path per line: real CRDs read from
# the Go modules that ship them (downloaded through the Go module proxy into the module
# cache), the minimal ones under tests/cluster/crds/, and our own under config/crd/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
moddir() { (cd "$here" && go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'); }

gwapi=$(moddir sigs.k8s.io/gateway-api@v1.5.1)
ls "$gwapi"/config/crd/standard/gateway.networking.k8s.io_*.yaml
certmanager=$(moddir github.com/cert-manager/cert-manager@v1.21.2)
ls "$certmanager"/deploy/crds/cert-manager.io_{certificates,certificaterequests,issuers,clusterissuers}.yaml
istio=$(moddir istio.io/api@v1.31.1)
echo "$istio/kubernetes/customresourcedefinitions.gen.yaml"
externaldns=$(moddir sigs.k8s.io/external-dns@v0.20.0)
echo "$externaldns/config/crd/standard/dnsendpoints.externaldns.k8s.io.yaml"
albc=$(moddir github.com/kubernetes-sigs/aws-load-balancer-controller@v0.0.0-20260423195125-93ff3b5fdaad)
echo "$albc/config/crd/bases/elbv2.k8s.aws_targetgroupbindings.yaml"
ls "$here"/crds/*.yaml
if [ -d "$here/../../config/crd" ]; then ls "$here"/../../config/crd/*.yaml; fi
