//go:build tools

// Package tools pins the Kueue manager that build.sh compiles with
// `go build sigs.k8s.io/kueue/cmd/kueue` from this module: the admission
// and quota controller operators put in front of dragon-scheduler, run
// against the test control plane with its webhooks on 127.0.0.1.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
