package ctl

import "github.com/homystack/nico/pkg/etcdtest"

// nicoctl accepts only https endpoints (etcd runs with mutual TLS), so its
// tests run their clusters on TLS whatever etcdtest's default; run passes
// a root certificate.
func init() { etcdtest.TLSDefault = true }
