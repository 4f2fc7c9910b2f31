// Package apply turns a machine's desired NixOS generation into the running
// system, checks that the machine is healthy afterwards, and rolls it back
// by itself when it is not.
//
// Two Appliers share one contract (contract_test.go): NixOS builds the
// flake's toplevel and activates it under a transient systemd unit; Exec runs
// a configured command with the generation's fields in its environment (the
// demo, the sandbox and the tests use it).
//
//	spec --validate--> fetch --> build --(same as running)--> Skipped
//	                                |
//	                                v
//	                  set profile, activate --fail--> roll back --> ErrActivate
//	                                |
//	                                v
//	                   health gate --fail--> roll back --> ErrHealth
//	                                |
//	                                v
//	                             Applied (RebootNeeded when the booted kernel differs)
package apply

import (
	"context"
	"errors"

	"github.com/homystack/nico/pkg/api"
)

// Sentinel errors: an apply fails with one of them wrapped.
var (
	ErrInvalid  = errors.New("apply: invalid configuration")
	ErrFetch    = errors.New("apply: fetch failed")
	ErrBuild    = errors.New("apply: build failed")
	ErrActivate = errors.New("apply: activation failed")
	ErrHealth   = errors.New("apply: health check failed")
	ErrRollback = errors.New("apply: rollback failed")
)

// Generation is one desired generation of this machine.
type Generation struct {
	// Machine is this machine's name (the default flake attribute).
	Machine string
	Number  int64
	Attempt int
	Spec    api.NixosConfigurationSpec
	// Checks are added to the applier's own health checks for this apply
	// (the agent adds the local etcd member's health on a control-plane node).
	Checks []Check
}

// Result is what an apply did.
type Result struct {
	// Toplevel identifies what the machine runs after the apply.
	Toplevel string
	// Skipped: the generation's system was already running.
	Skipped bool
	// RolledBack: the generation failed and the previous system was restored.
	RolledBack bool
	// RebootNeeded: the booted kernel differs from the current system's.
	RebootNeeded bool
}

// Applier applies generations to this machine. Apply either leaves the
// generation running and healthy, or restores what ran before and returns an
// error wrapping one of the sentinels. Current tells what runs now.
type Applier interface {
	Apply(ctx context.Context, gen Generation) (Result, error)
	Current(ctx context.Context) (string, error)
}
