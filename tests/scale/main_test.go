// Package scale measures nico at fleet size: a real coordinator and a real
// three-member etcd (the etcd binaries) against hundreds to a thousand
// data-plane machines whose agents run nico's registration, heartbeat and
// generation code, many per agent-host process, with an applier that takes
// a set time. `make bench-scale` runs it (and `make bench`).
package scale

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(envHost); path != "" {
		os.Exit(runHost(path))
	}
	os.Exit(m.Run())
}
