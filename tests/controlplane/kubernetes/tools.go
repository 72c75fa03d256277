//go:build tools

// Package tools pins the upstream commands that build.sh compiles, so that
// `go mod tidy` keeps their whole dependency graph in go.mod/go.sum.
// build.sh runs `go build k8s.io/kubernetes/cmd/<name>` from this module.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
