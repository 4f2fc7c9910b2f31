package api

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/etcdversion"
)

// Bounds of EtcdPolicy's durations when set (zero leaves a field unset);
// the coordinator.* flags that give their bootstrap defaults use the same.
const (
	MinLearnerTimeout          = time.Second
	MinHealthTimeout           = 100 * time.Millisecond
	MaxHealthTimeout           = 30 * time.Second
	MinReplaceDeadMembersAfter = 10 * time.Second
	// MinCompactionRetention bounds spec.policy.compactionRetention: a
	// shorter window would cut off watches resumed after a short outage.
	MinCompactionRetention = time.Minute
)

// ErrInvalidSpec is what every FieldError matches with errors.Is.
var ErrInvalidSpec = errors.New("api: invalid spec")

// FieldError is one refused field: its path (spec.members[1].peerURLs[0]),
// the value given, why, and what is accepted.
type FieldError struct {
	Field    string
	Value    any
	Reason   string // may be ""
	Accepted string
}

// Error implements error: "spec.voters: 4 is not accepted (why); use ...".
func (e *FieldError) Error() string {
	s := fmt.Sprintf("%s: %s is not accepted", e.Field, quoteValue(e.Value))
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s + "; " + e.Accepted
}

// Unwrap makes errors.Is(err, ErrInvalidSpec) true.
func (e *FieldError) Unwrap() error { return ErrInvalidSpec }

func quoteValue(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("%q", x)
	case Duration:
		return time.Duration(x).String()
	default:
		return fmt.Sprint(x)
	}
}

// memberNameRE is what an external member's name may be: it is written
// into --initial-cluster as name=url, so no '=', ',' or spaces.
var memberNameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)

// Validate checks the spec on its own (the stored object and etcd's member
// list are the caller's to compare with) and returns every problem joined,
// each a *FieldError naming its field path.
func (s EtcdClusterSpec) Validate() error {
	var errs []error
	bad := func(field string, v any, reason, accepted string) {
		errs = append(errs, &FieldError{Field: field, Value: v, Reason: reason, Accepted: accepted})
	}
	if err := validateVoters(s.Voters); err != nil {
		errs = append(errs, err)
	}
	if s.Version != "" {
		reason := ""
		if v, err := etcdversion.Parse(s.Version); err != nil {
			reason = "not MAJOR.MINOR.PATCH"
		} else if !etcdversion.IsKnown(v) {
			reason = "not an etcd release nico knows"
		}
		if reason != "" {
			bad("spec.version", s.Version, reason, "use a known etcd release as 3.6.16 ("+knownReleases()+"), or \"\" to roll no version")
		}
	}
	errs = append(errs, validateMembers(s.Members)...)
	errs = append(errs, s.Policy.validate()...)
	errs = append(errs, s.Snapshots.validate()...)
	if err := validatePoolName("spec.machinePool", s.MachinePool); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validateVoters refuses counts other than 1, 3, 5 and 7, with the reason.
func validateVoters(n int) error {
	accepted := "use 1, 3, 5 or 7 (the default is 3)"
	switch {
	case n == 1 || n == 3 || n == 5 || n == 7:
		return nil
	case n <= 0:
		return &FieldError{Field: "spec.voters", Value: n, Reason: "the cluster needs at least one voter", Accepted: accepted}
	case n%2 == 0 && n < 8:
		return &FieldError{Field: "spec.voters", Value: n,
			Reason:   fmt.Sprintf("an even count tolerates no more failures than the odd one below it (%d voters can lose %d, as %d can) and needs one more for quorum", n, (n-1)/2, n-1),
			Accepted: accepted}
	default:
		return &FieldError{Field: "spec.voters", Value: n, Reason: "more than 7 voters slow every write and add no useful tolerance", Accepted: accepted}
	}
}

// validateMembers checks each external member and that no name or URL is
// declared twice.
func validateMembers(ms []EtcdMemberSpec) []error {
	var errs []error
	bad := func(field string, v any, reason, accepted string) {
		errs = append(errs, &FieldError{Field: field, Value: v, Reason: reason, Accepted: accepted})
	}
	names := map[string]string{}
	urls := map[string]string{}
	for i, m := range ms {
		at := fmt.Sprintf("spec.members[%d]", i)
		switch {
		case !memberNameRE.MatchString(m.Name):
			bad(at+".name", m.Name, "", "use 1 to 63 letters, digits, '.', '_' and '-', starting and ending with a letter or digit")
		case names[m.Name] != "":
			bad(at+".name", m.Name, "already the name of "+names[m.Name], "give each member its own name")
		default:
			names[m.Name] = at
		}
		if m.Kind != MemberExternal {
			bad(at+".kind", m.Kind, "", fmt.Sprintf("use %q (members nico runs come from registered nodes)", MemberExternal))
		}
		for _, list := range []struct {
			name    string
			urls    []string
			example string
		}{{"peerURLs", m.PeerURLs, "https://10.0.0.9:2380"}, {"clientURLs", m.ClientURLs, "https://10.0.0.9:2379"}} {
			if len(list.urls) == 0 {
				bad(at+"."+list.name, list.urls, "empty", "list at least one http or https URL, as "+list.example)
			}
			for j, u := range list.urls {
				f := fmt.Sprintf("%s.%s[%d]", at, list.name, j)
				if err := checkMemberURL(u); err != "" {
					bad(f, u, err, "use an http or https URL with a host and port and no path, as "+list.example)
					continue
				}
				key := strings.TrimSuffix(u, "/")
				if prev := urls[key]; prev != "" {
					bad(f, u, "already given as "+prev, "give each URL once")
					continue
				}
				urls[key] = f
			}
		}
	}
	return errs
}

// checkMemberURL returns why u is not a member URL etcd accepts, or "".
func checkMemberURL(u string) string {
	p, err := url.Parse(u)
	switch {
	case err != nil:
		return "not a URL"
	case p.Scheme != "http" && p.Scheme != "https":
		return "the scheme is not http or https"
	case p.Hostname() == "":
		return "no host"
	case p.Port() == "":
		return "no port"
	case p.Path != "" && p.Path != "/", p.RawQuery != "", p.Fragment != "", p.User != nil:
		return "a path, query, fragment or user part"
	}
	return ""
}

// validate checks the policy's bounds; zero leaves a field unset.
func (p EtcdPolicy) validate() []error {
	var errs []error
	dur := func(field string, d Duration, lo, hi time.Duration, zero string) {
		v := time.Duration(d)
		if v == 0 || (v >= lo && (hi == 0 || v <= hi)) {
			return
		}
		want := "use 0 (" + zero + ") or at least " + lo.String()
		if hi != 0 {
			want = "use 0 (" + zero + ") or from " + lo.String() + " to " + hi.String()
		}
		errs = append(errs, &FieldError{Field: "spec.policy." + field, Value: d, Accepted: want})
	}
	unset := "unset: the coordinator's setting"
	dur("learnerStartTimeout", p.LearnerStartTimeout, MinLearnerTimeout, 0, unset)
	dur("learnerProgressTimeout", p.LearnerProgressTimeout, MinLearnerTimeout, 0, unset)
	dur("healthTimeout", p.HealthTimeout, MinHealthTimeout, MaxHealthTimeout, unset)
	dur("replaceDeadMembersAfter", p.ReplaceDeadMembersAfter, MinReplaceDeadMembersAfter, 0, "never")
	if f := p.DefragFragmentation; !(f >= 0 && f < 1) {
		errs = append(errs, &FieldError{Field: "spec.policy.defragFragmentation", Value: f, Accepted: "use 0 (never) or a fraction of the database file at least 0 and below 1, as 0.5"})
	}
	if p.DefragMinDBSize < 0 {
		errs = append(errs, &FieldError{Field: "spec.policy.defragMinDBSize", Value: p.DefragMinDBSize, Accepted: "use 0 or more bytes"})
	}
	dur("compactionRetention", p.CompactionRetention, MinCompactionRetention, 0, "1h")
	if p.CompactionMinRevisions < 0 {
		errs = append(errs, &FieldError{Field: "spec.policy.compactionMinRevisions", Value: p.CompactionMinRevisions, Accepted: "use 0 (none beyond the retention) or more revisions"})
	}
	if p.CompactionDisabled {
		off := "unset it while spec.policy.compactionDisabled is true (nico compacts nothing then), or set compactionDisabled to false"
		if p.CompactionRetention != 0 {
			errs = append(errs, &FieldError{Field: "spec.policy.compactionRetention", Value: p.CompactionRetention, Accepted: off})
		}
		if p.CompactionMinRevisions != 0 {
			errs = append(errs, &FieldError{Field: "spec.policy.compactionMinRevisions", Value: p.CompactionMinRevisions, Accepted: off})
		}
	}
	if q := p.QuotaBackendBytes; q != 0 && (q < MinQuotaBackendBytes || q > MaxQuotaBackendBytes) {
		errs = append(errs, &FieldError{Field: "spec.policy.quotaBackendBytes", Value: q,
			Accepted: fmt.Sprintf("use 0 (etcd's default, %d bytes) or from %d (1 MiB) to %d (8 GiB) bytes", DefaultQuotaBackendBytes, MinQuotaBackendBytes, MaxQuotaBackendBytes)})
	}
	return errs
}

// knownReleases is "3.4.0-3.4.45, 3.5.0-3.5.35, ...".
func knownReleases() string {
	var s []string
	for _, k := range etcdversion.Known() {
		s = append(s, fmt.Sprintf("%s.0-%s", k.MinorString(), k))
	}
	return strings.Join(s, ", ")
}

// validatePoolName refuses a machinePool that cannot be a MachinePool's
// name ("" names none).
func validatePoolName(field, name string) error {
	if name == "" || (len(name) <= 63 && dnsLabelRE.MatchString(name)) {
		return nil
	}
	return &FieldError{Field: field, Value: name, Reason: "not a machine pool's name",
		Accepted: "name a MachinePool: a DNS label, 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit, or \"\" for none"}
}
