// Package objectapply checks and writes the objects people declare, the
// fleet's EtcdCluster, MachinePools and KubernetesClusters: the one path
// both `nicoctl apply -f` and the agent that applies the flake's manifest
// (services.nico.objects, docs/declared-objects.md) take.
//
//	file --Split--> documents --Decode--> each checked on its own (Invalid)
//	     --Plan--> each checked against what is stored and running (Refused)
//	     --Commit--> one etcd transaction guarded on every key read
//
// If one document is refused, nothing is written. A flake's manifest
// (ApplyFlake) adds the order of manifests (Decide), the deletions of
// objects the flake no longer declares and the FlakeObjects record to the
// same transaction; an object the flake declares is refused to nicoctl
// apply without Force.
package objectapply

import (
	"errors"
	"fmt"
)

// InvalidError is a document refused on its own (a bad field, an unknown
// kind): nicoctl ends with 2.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

// RefusedError is a document refused against what is stored or running:
// nicoctl ends with 3.
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

// refusal is one document's refusal, before Plan joins them.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }

// nothingWritten joins the refusals of a file, saying that none of its
// objects was written.
func nothingWritten(n int, errs []error) error {
	if n > 1 {
		errs = append(errs, fmt.Errorf("nothing written: none of the file's %d objects", n))
	}
	return errors.Join(errs...)
}
