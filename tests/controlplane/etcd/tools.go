//go:build tools

// Package tools pins the etcd server command that build.sh compiles with
// `go build go.etcd.io/etcd/server/v3` from this module.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
