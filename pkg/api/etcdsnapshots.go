package api

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// EtcdSnapshotsSpec is spec.snapshots of the EtcdCluster: where the
// leader stores snapshots, how often it takes one, how many it keeps, and
// whether a membership change or a control-plane rollout step waits for
// one. With no destination, nico takes none.
type EtcdSnapshotsSpec struct {
	// Destination is where snapshots go, off the node they are taken
	// on: an absolute directory (a mounted share), file:///PATH, or
	// s3://HOST[:PORT]/BUCKET[/PREFIX][?tls=false] (keys from the
	// coordinator's AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY).
	// Default: none: no snapshots are taken.
	// Validation: an absolute directory, file:///PATH or
	// s3://HOST[:PORT]/BUCKET[/PREFIX] (only ?tls=false or ?tls=true);
	// required when interval or beforeChange ask for snapshots.
	Destination string `json:"destination,omitempty"`
	// Interval is the time between scheduled snapshots (0: none are
	// scheduled; the other triggers still take them).
	// Validation: 0 or at least 1m (MinSnapshotInterval).
	Interval Duration `json:"interval,omitempty"`
	// Keep is how many of the newest snapshots are kept (0: no limit).
	// Validation: 0 or more.
	Keep int `json:"keep,omitempty"`
	// MaxAge removes snapshots older than this (0: no limit); the newest
	// one is always kept.
	// Validation: 0 or at least 1m (MinSnapshotInterval).
	MaxAge Duration `json:"maxAge,omitempty"`
	// BeforeChange says what a failed snapshot before a membership change
	// or a control-plane rollout step does: SnapshotRequired ("", the
	// default) holds the change until a snapshot succeeds,
	// SnapshotBestEffort journals the failure and goes on, SnapshotOff
	// takes none before changes.
	// Default: Required with a destination, Off without (BeforeChangePolicy).
	// Validation: "", Required, BestEffort or Off.
	BeforeChange string `json:"beforeChange,omitempty"`
	// Timeout bounds one snapshot, stream and upload (0: 5 minutes).
	// Validation: 0 or at least 10s.
	Timeout Duration `json:"timeout,omitempty"`
}

// Values of EtcdSnapshotsSpec.BeforeChange.
const (
	SnapshotRequired   = "Required"
	SnapshotBestEffort = "BestEffort"
	SnapshotOff        = "Off"
)

// Bounds of spec.snapshots.
const (
	MinSnapshotInterval    = time.Minute
	DefaultSnapshotTimeout = 5 * time.Minute
)

// Enabled tells whether snapshots are configured (a destination is set).
func (s EtcdSnapshotsSpec) Enabled() bool { return s.Destination != "" }

// BeforeChangePolicy is BeforeChange with its default filled in:
// SnapshotOff when no destination is set.
func (s EtcdSnapshotsSpec) BeforeChangePolicy() string {
	switch {
	case !s.Enabled():
		return SnapshotOff
	case s.BeforeChange == "":
		return SnapshotRequired
	}
	return s.BeforeChange
}

// TimeoutOrDefault is Timeout, or DefaultSnapshotTimeout when unset.
func (s EtcdSnapshotsSpec) TimeoutOrDefault() time.Duration {
	if s.Timeout <= 0 {
		return DefaultSnapshotTimeout
	}
	return time.Duration(s.Timeout)
}

// AcceptedSnapshotDestinations says what a destination may be.
const AcceptedSnapshotDestinations = "use an absolute directory (/mnt/share/etcd, a mounted share), file:///PATH, or s3://HOST[:PORT]/BUCKET[/PREFIX] with ?tls=false for plain http"

// bucketRE is what S3 accepts as a bucket name.
var bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// SnapshotDestinationProblem returns why dest is not a snapshot
// destination, or "".
func SnapshotDestinationProblem(dest string) string {
	switch {
	case strings.HasPrefix(dest, "s3://"):
		u, err := url.Parse(dest)
		if err != nil {
			return "not a URL: " + err.Error()
		}
		if u.User != nil {
			return "keys do not belong in the URL (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for the coordinator)"
		}
		if u.Host == "" {
			return "no host"
		}
		b, _, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
		if b == "" {
			return "no bucket"
		}
		if !bucketRE.MatchString(b) {
			return fmt.Sprintf("bucket %q is not an S3 bucket name (3 to 63 lowercase letters, digits, '.' and '-', starting and ending with a letter or digit)", b)
		}
		for k, v := range u.Query() {
			if k != "tls" || len(v) != 1 || (v[0] != "false" && v[0] != "true") {
				return fmt.Sprintf("unknown parameter %s=%v (only tls=false or tls=true)", k, v)
			}
		}
		return ""
	case strings.Contains(dest, "://") && !strings.HasPrefix(dest, "file://"):
		return "an unknown scheme"
	case !filepath.IsAbs(strings.TrimPrefix(dest, "file://")):
		return "not an absolute path"
	}
	return ""
}

// validate checks spec.snapshots; the zero value (no snapshots) passes.
func (s EtcdSnapshotsSpec) validate() []error {
	var errs []error
	bad := func(field string, v any, reason, accepted string) {
		errs = append(errs, &FieldError{Field: "spec.snapshots." + field, Value: v, Reason: reason, Accepted: accepted})
	}
	if s.Destination == "" {
		if s.Interval != 0 || s.BeforeChange == SnapshotRequired || s.BeforeChange == SnapshotBestEffort {
			bad("destination", s.Destination, "snapshots are asked for (interval or beforeChange) but have nowhere to go", AcceptedSnapshotDestinations)
		}
	} else if p := SnapshotDestinationProblem(s.Destination); p != "" {
		bad("destination", s.Destination, p, AcceptedSnapshotDestinations)
	}
	if d := time.Duration(s.Interval); d != 0 && d < MinSnapshotInterval {
		bad("interval", s.Interval, "", "use 0 (none scheduled) or at least "+MinSnapshotInterval.String())
	}
	if s.Keep < 0 {
		bad("keep", s.Keep, "", "use 0 (no limit) or a count of snapshots, as 24")
	}
	if d := time.Duration(s.MaxAge); d != 0 && d < MinSnapshotInterval {
		bad("maxAge", s.MaxAge, "", "use 0 (no limit) or at least "+MinSnapshotInterval.String()+", as 168h")
	}
	switch s.BeforeChange {
	case "", SnapshotRequired, SnapshotBestEffort, SnapshotOff:
	default:
		bad("beforeChange", s.BeforeChange, "", fmt.Sprintf("use %q (the default: a change waits for a snapshot), %q (a failure is journaled, the change goes on) or %q", SnapshotRequired, SnapshotBestEffort, SnapshotOff))
	}
	if d := time.Duration(s.Timeout); d != 0 && d < 10*time.Second {
		bad("timeout", s.Timeout, "", "use 0 (5m) or at least 10s")
	}
	return errs
}

// EtcdSnapshotsStatus is status.snapshots of the EtcdCluster: the last
// snapshot taken, the last failure, and the last verified restore.
type EtcdSnapshotsStatus struct {
	// Last is the newest snapshot the leader took.
	Last *SnapshotRecord `json:"last,omitempty"`
	// LastFailure is the newest failed attempt, and when.
	LastFailure   string    `json:"lastFailure,omitempty"`
	LastFailureAt time.Time `json:"lastFailureAt,omitzero"`
	// LastVerified is the newest restore drill (nicoctl snapshot verify).
	LastVerified *SnapshotVerification `json:"lastVerified,omitempty"`
}

// SnapshotRecord names one stored snapshot.
type SnapshotRecord struct {
	Name     string    `json:"name"`
	Where    string    `json:"where"`
	TakenAt  time.Time `json:"takenAt"`
	Revision int64     `json:"revision"`
	Size     int64     `json:"size"`
	Member   string    `json:"member,omitempty"`
	Reason   string    `json:"reason,omitempty"`
}

// SnapshotVerification is the outcome of one restore drill: the snapshot
// restored into a throwaway member, and what that member served.
type SnapshotVerification struct {
	Name       string    `json:"name"`
	Where      string    `json:"where,omitempty"`
	VerifiedAt time.Time `json:"verifiedAt"`
	// OK is false when the drill failed; Message says why.
	OK       bool     `json:"ok"`
	Keys     int64    `json:"keys"`
	Revision int64    `json:"revision"`
	Took     Duration `json:"took,omitempty"`
	By       string   `json:"by,omitempty"`
	Message  string   `json:"message,omitempty"`
}

// KindSnapshotDrill is the kind of the newest restore drill's report.
const KindSnapshotDrill = "SnapshotDrill"

// SnapshotDrillName is the name of the one SnapshotDrill: each drill
// replaces the last.
const SnapshotDrillName = "last"

// SnapshotDrill is the report of the newest restore drill, written by
// `nicoctl snapshot verify`; the coordinator leader copies it, fenced,
// into the EtcdCluster's status.snapshots.lastVerified (nicoctl is no
// writer of the EtcdCluster's status).
type SnapshotDrill struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta           `json:"metadata"`
	Status   SnapshotVerification `json:"status"`
}

// NewSnapshotDrill returns a drill report holding v.
func NewSnapshotDrill(v SnapshotVerification) *SnapshotDrill {
	return &SnapshotDrill{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindSnapshotDrill}, Metadata: ObjectMeta{Name: SnapshotDrillName}, Status: v}
}

// GetTypeMeta implements Object.
func (d *SnapshotDrill) GetTypeMeta() *TypeMeta { return &d.TypeMeta }

// GetMetadata implements Object.
func (d *SnapshotDrill) GetMetadata() *ObjectMeta { return &d.Metadata }
