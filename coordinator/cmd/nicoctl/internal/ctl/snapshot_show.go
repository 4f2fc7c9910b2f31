package ctl

import (
	"fmt"
	"io"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// describeSnapshots writes the Snapshots section of describe etcdcluster:
// the spec's schedule and the last snapshot, failure and verified restore.
func describeSnapshots(w io.Writer, now time.Time, sp api.EtcdSnapshotsSpec, st api.EtcdSnapshotsStatus) {
	fmt.Fprintln(w, "Snapshots:")
	if !sp.Enabled() {
		field(w, "  Destination", "- (none taken: set spec.snapshots.destination)")
	} else {
		field(w, "  Destination", sp.Destination)
		every := "- (none scheduled)"
		if sp.Interval > 0 {
			every = time.Duration(sp.Interval).String()
		}
		field(w, "  Every", every)
		keep := "all"
		if sp.Keep > 0 {
			keep = fmt.Sprintf("the newest %d", sp.Keep)
		}
		if sp.MaxAge > 0 {
			keep += ", none older than " + time.Duration(sp.MaxAge).String()
		}
		field(w, "  Keep", keep)
		field(w, "  Before changes", sp.BeforeChangePolicy())
	}
	if l := st.Last; l != nil {
		field(w, "  Last", fmt.Sprintf("%s (%s ago, revision %d, %s, from %s, %s)", l.Name, age(now, l.TakenAt), l.Revision, bytesCell(l.Size), l.Member, l.Reason))
	} else {
		field(w, "  Last", "-")
	}
	if st.LastFailure != "" {
		field(w, "  Last failure", fmt.Sprintf("%s ago: %s", age(now, st.LastFailureAt), oneLine(st.LastFailure)))
	}
	if v := st.LastVerified; v != nil {
		outcome := fmt.Sprintf("ok, %d keys at revision %d", v.Keys, v.Revision)
		if !v.OK {
			outcome = "FAILED: " + oneLine(v.Message)
		}
		field(w, "  Last verified restore", fmt.Sprintf("%s (%s ago): %s", v.Name, age(now, v.VerifiedAt), outcome))
	} else {
		field(w, "  Last verified restore", "- (nicoctl snapshot verify)")
	}
}
