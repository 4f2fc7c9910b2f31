package kubeversion

import (
	"errors"
	"fmt"
)

// ErrRefusedChange: both versions are known but Kubernetes does not
// support the change in one step.
var ErrRefusedChange = errors.New("kubeversion: version change refused")

// Kind is the kind of a version change.
type Kind string

// Change kinds.
const (
	// KindNone: the version does not move (any other change of the
	// cluster's machines).
	KindNone Kind = "None"
	// KindPatchUp: a newer patch of the same minor.
	KindPatchUp Kind = "PatchUpgrade"
	// KindPatchDown: an older patch of the same minor.
	KindPatchDown Kind = "PatchDowngrade"
	// KindMinorUp: one minor up.
	KindMinorUp Kind = "MinorUpgrade"
)

// Change is an accepted change of spec.version and the order it rolls in.
type Change struct {
	Kind     Kind
	From, To Version
	// ControlPlaneFirst: the control plane rolls before the data plane.
	// Kubernetes' version skew policy forbids a kubelet newer than the API
	// server, so a change that moves the version up reaches the control
	// plane first; a change that does not move it (or moves it down
	// within a minor, so that kubelets are never the newer) rolls the data
	// plane first, where a bad generation does not threaten quorum.
	ControlPlaneFirst bool
}

// String is "MinorUpgrade 1.36.3 -> 1.37.2 (control plane first)".
func (c Change) String() string {
	order := "data plane first"
	if c.ControlPlaneFirst {
		order = "control plane first"
	}
	return fmt.Sprintf("%s %s -> %s (%s)", c.Kind, c.From, c.To, order)
}

// ChangeError is a refused change: both versions, why, and the next step
// toward To that would be accepted ("" when there is none).
type ChangeError struct {
	From, To Version
	Reason   string
	Next     string
}

// Error implements error.
func (e *ChangeError) Error() string {
	s := fmt.Sprintf("Kubernetes version change %s -> %s refused: %s", e.From, e.To, e.Reason)
	if e.Next != "" {
		s += "; " + e.Next
	}
	return s
}

// Unwrap makes errors.Is(err, ErrRefusedChange) true.
func (e *ChangeError) Unwrap() error { return ErrRefusedChange }

// Check decides a change of the cluster's version from from to to: both
// must be in the table; a patch change within a minor and one minor up
// are accepted; two minors up, a minor down and a major change are
// refused, naming the next allowed step.
func Check(from, to Version) (Change, error) {
	if err := CheckKnown(to); err != nil {
		return Change{}, err
	}
	c := Change{From: from, To: to}
	switch cmp := from.Compare(to); {
	case cmp == 0:
		c.Kind = KindNone
		return c, nil
	case from.SameMinor(to) && cmp < 0:
		c.Kind, c.ControlPlaneFirst = KindPatchUp, true
		return c, nil
	case from.SameMinor(to):
		c.Kind = KindPatchDown
		return c, nil
	}
	refuse := func(reason, next string) (Change, error) {
		return Change{}, &ChangeError{From: from, To: to, Reason: reason, Next: next}
	}
	if from.Major != to.Major {
		return refuse("the major version changes", "keep Kubernetes "+from.MinorString()+".x")
	}
	if err := CheckKnown(from); err != nil && to.Minor > from.Minor {
		return refuse(fmt.Sprintf("the running minor %s is not in nico's table (it knows %s)", from.MinorString(), Minors()), "")
	}
	switch d := to.Minor - from.Minor; {
	case d == 1:
		c.Kind, c.ControlPlaneFirst = KindMinorUp, true
		return c, nil
	case d > 1:
		next := Version{from.Major, from.Minor + 1, 0}
		return refuse(fmt.Sprintf("%d minors up; Kubernetes upgrades one minor at a time", d),
			fmt.Sprintf("upgrade to %s.x first (any %s patch), then toward %s", next.MinorString(), next.MinorString(), to))
	default:
		return refuse("a minor down; Kubernetes does not support downgrading a minor",
			fmt.Sprintf("keep %s.x (a patch change within it is accepted) or restore the cluster from a backup taken before the upgrade", from.MinorString()))
	}
}

// CheckStrings is Check of two version strings; an empty from (no version
// declared before) accepts any known to with KindNone, and an empty to
// (no version declared any more) is KindNone from anything.
func CheckStrings(from, to string) (Change, error) {
	if to == "" {
		return Change{Kind: KindNone}, nil
	}
	t, err := Parse(to)
	if err != nil {
		return Change{}, err
	}
	if from == "" {
		if err := CheckKnown(t); err != nil {
			return Change{}, err
		}
		return Change{Kind: KindNone, To: t}, nil
	}
	f, err := Parse(from)
	if err != nil {
		return Change{}, err
	}
	return Check(f, t)
}
