package membership

import "strings"

// planNoSpace waits while etcd's NOSPACE alarm is raised: etcd refuses
// every write, so no change could be journaled, and the leader's
// etcd-status controller reclaims the space and disarms it first
// (coordinator/etcdnospace.go). An operation in flight waits too, at its
// step: its member calls (MemberAdd, promote, remove) are not KV writes
// etcd would refuse, but no change is made that its journal could not
// record; it resumes once writes are accepted.
func planNoSpace(obs Observed) (Step, bool) {
	var on []string
	for _, m := range obs.Members {
		if m.NoSpace {
			on = append(on, m.label())
		}
	}
	if len(on) == 0 {
		return Step{}, false
	}
	return Step{Action: Wait, Op: obs.Active, Reason: "etcd's NOSPACE alarm is raised (reported by " + strings.Join(on, ", ") + "): no membership change until the space is reclaimed and the alarm disarmed"}, true
}
