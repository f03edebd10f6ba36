//go:build tools

// Package tools pins the upstream Gateway API conformance suite so that
// `go mod tidy` keeps it (and its test-only dependencies) in go.mod/go.sum.
// Nothing here is compiled into a binary; build the suite with
//
//	go test -c -o /tmp/conformance.test sigs.k8s.io/gateway-api/conformance
package tools

import (
	_ "sigs.k8s.io/gateway-api/conformance"
	_ "sigs.k8s.io/gateway-api/conformance/tests"
	_ "sigs.k8s.io/gateway-api/conformance/utils/flags"
	_ "sigs.k8s.io/gateway-api/conformance/utils/suite"
	_ "sigs.k8s.io/gateway-api/pkg/features"
)
