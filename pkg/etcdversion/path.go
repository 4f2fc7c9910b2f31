package etcdversion

import (
	"errors"
	"fmt"
)

// Sentinels of Check's errors, for errors.Is.
var (
	// ErrUnknownVersion: a version outside the table of known releases.
	ErrUnknownVersion = errors.New("etcdversion: unknown etcd version")
	// ErrRefusedPath: both versions are known but etcd does not support
	// going from one to the other in one step.
	ErrRefusedPath = errors.New("etcdversion: version path refused")
)

// Kind is the kind of one version step.
type Kind string

// Step kinds.
const (
	// KindNone: the versions are equal, nothing to roll.
	KindNone Kind = "None"
	// KindPatch: a patch change within one minor (either direction; the
	// data format is the minor's), rolled member by member.
	KindPatch Kind = "Patch"
	// KindUpgrade: one minor up, from the latest patch of the current
	// minor, rolled member by member; etcd raises the cluster version
	// once every member runs the new minor.
	KindUpgrade Kind = "Upgrade"
	// KindDowngrade: one minor down through etcd's downgrade API
	// (downgrade validate, downgrade enable, then the rolling change;
	// downgrade cancel on abort).
	KindDowngrade Kind = "Downgrade"
)

// Step is an allowed version change.
type Step struct {
	Kind Kind
	From Version
	To   Version
}

// String is "Upgrade 3.6.16 -> 3.7.3".
func (s Step) String() string {
	return fmt.Sprintf("%s %s -> %s", s.Kind, s.From, s.To)
}

// PathError is a refused path: the versions, why, and the next allowed
// step toward To when there is one.
type PathError struct {
	From, To Version
	// Reason says why, as "two minors up".
	Reason string
	// Next is the next step toward To that would be allowed ("" if none),
	// as "upgrade to 3.6.16 first, then 3.7.x".
	Next string
}

// Error implements error.
func (e *PathError) Error() string {
	s := fmt.Sprintf("etcd version path %s -> %s refused: %s", e.From, e.To, e.Reason)
	if e.Next != "" {
		s += "; " + e.Next
	}
	return s
}

// Unwrap makes errors.Is(err, ErrRefusedPath) true.
func (e *PathError) Unwrap() error { return ErrRefusedPath }

// CheckStrings is Check on two version strings.
func CheckStrings(from, to string) (Step, error) {
	f, err := Parse(from)
	if err != nil {
		return Step{}, fmt.Errorf("current version: %w", err)
	}
	t, err := Parse(to)
	if err != nil {
		return Step{}, fmt.Errorf("desired version: %w", err)
	}
	return Check(f, t)
}

// Check decides whether the cluster may go from version from to version
// to in one step, and of which kind:
//
//	same version                           None
//	same minor, other patch                Patch
//	next minor, from its minor's latest    Upgrade
//	previous minor's latest, from >= 3.6   Downgrade (etcd's downgrade API)
//	anything else                          refused (*PathError)
//
// Both versions must be known (IsKnown), or ErrUnknownVersion.
func Check(from, to Version) (Step, error) {
	if err := checkKnown(to); err != nil {
		return Step{}, fmt.Errorf("desired version: %w", err)
	}
	if err := checkKnown(from); err != nil {
		return Step{}, fmt.Errorf("current version: %w", err)
	}
	step := Step{From: from, To: to}
	refuse := func(reason, next string) (Step, error) {
		return Step{}, &PathError{From: from, To: to, Reason: reason, Next: next}
	}
	fromLatest, _ := LatestPatch(from)
	toLatest, _ := LatestPatch(to)
	minors := to.Minor - from.Minor
	switch {
	case from == to:
		step.Kind = KindNone
	case from.Major != to.Major:
		return refuse("a major version change", "")
	case minors == 0:
		step.Kind = KindPatch
	case minors == 1:
		if from != fromLatest {
			return refuse(fmt.Sprintf("a minor upgrade starts from the latest %s patch, %s", from.MinorString(), fromLatest),
				fmt.Sprintf("upgrade to %s first, then %s", fromLatest, to))
		}
		step.Kind = KindUpgrade
	case minors > 1:
		next, _ := LatestPatch(Version{from.Major, from.Minor + 1, 0})
		first := ""
		if from != fromLatest {
			first = fmt.Sprintf("upgrade to %s first, then %s, then %s.x", fromLatest, next, to.MinorString())
		} else {
			first = fmt.Sprintf("upgrade to %s first, then %s.x", next, to.MinorString())
		}
		return refuse(fmt.Sprintf("%d minors up; etcd upgrades one minor at a time", minors), first)
	case minors == -1:
		if from.Compare(downgradeAPIFrom) < 0 {
			return refuse(fmt.Sprintf("etcd's downgrade API downgrades from %s on", downgradeAPIFrom.MinorString()), "")
		}
		if to != toLatest {
			return refuse(fmt.Sprintf("a minor downgrade goes to the latest %s patch, %s", to.MinorString(), toLatest),
				fmt.Sprintf("downgrade to %s, then change patch within %s", toLatest, to.MinorString()))
		}
		step.Kind = KindDowngrade
	default: // minors < -1
		prev, _ := LatestPatch(Version{from.Major, from.Minor - 1, 0})
		return refuse(fmt.Sprintf("%d minors down; etcd downgrades one minor at a time", -minors),
			fmt.Sprintf("downgrade to %s first", prev))
	}
	return step, nil
}
