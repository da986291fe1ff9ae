//go:build tools

// Package etcd pins the etcd server built into .testbin/bin.
package etcd

import _ "go.etcd.io/etcd/server/v3"
