// Package etcdstatus builds the EtcdCluster's status from what the leader
// observed (etcd's member list with each member's Status, its alarms, the
// registered nodes, the operation in flight) and the declared spec, and
// estimates a learner's catch-up. It is pure: no clock, no etcd.
package etcdstatus

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
)

// Input is everything Build looks at.
type Input struct {
	Spec api.EtcdClusterSpec
	// Members are etcd's members with the Status each answered.
	Members []etcdadmin.MemberStatus
	Alarms  []etcdadmin.Alarm
	// Nodes are the registered nodes; control-plane ones with no member
	// are standbys.
	Nodes []*api.Node
	// Alive is each node's heartbeat liveness (a standby's health).
	Alive map[string]bool
	// Active is the name of the operation in flight ("" none).
	Active string
	// Progress is each learner's catch-up estimate (Estimate).
	Progress map[api.MemberID]Progress
	// Prev is the status last written: conditions keep their Since while
	// their status holds.
	Prev api.EtcdClusterStatus
	Now  time.Time
}

// Build returns the status for in. It does not set External (another
// controller owns it) nor UpdatedAt nor ObservedRevision.
func Build(in Input) api.EtcdClusterStatus {
	var st api.EtcdClusterStatus
	leader := LeaderOf(in.Members)
	alarmsOf := map[api.MemberID][]string{}
	for _, a := range in.Alarms {
		alarmsOf[a.Member] = append(alarmsOf[a.Member], a.Type)
	}
	nodeByPeer := map[string]*api.Node{}
	for _, n := range in.Nodes {
		if n.Spec.PeerURL != "" && n.Status.Phase != api.NodeRemoved {
			nodeByPeer[n.Spec.PeerURL] = n
		}
	}
	externalByPeer := map[string]api.EtcdMemberSpec{}
	for _, e := range in.Spec.Members {
		for _, u := range e.PeerURLs {
			externalByPeer[u] = e
		}
	}
	hasMember := map[string]bool{}
	seenExternal := map[string]bool{}
	names := map[api.MemberID]string{}
	healthyVoters := 0
	for _, m := range in.Members {
		ms := api.EtcdMemberStatus{Name: m.Name, ID: m.ID, Role: api.RoleVoter}
		if m.Learner {
			ms.Role = api.RoleLearner
		}
		for _, u := range m.PeerURLs {
			if n := nodeByPeer[u]; n != nil {
				ms.Node = n.Metadata.Name
				hasMember[n.Metadata.Name] = true
			}
			if e, ok := externalByPeer[u]; ok {
				ms.Role = api.RoleExternal
				seenExternal[e.Name] = true
				if ms.Name == "" {
					ms.Name = e.Name
				}
			}
		}
		if ms.Name == "" {
			ms.Name = ms.Node
		}
		if ms.Name == "" {
			ms.Name = m.ID.String()
		}
		names[m.ID] = ms.Name
		ms.Alarms = alarmsOf[m.ID]
		if m.Reachable {
			ms.Version, ms.RaftTerm, ms.RaftIndex, ms.AppliedIndex = m.Version, m.RaftTerm, m.RaftIndex, m.AppliedIndex
			ms.DBSize, ms.DBSizeInUse, ms.DBSizeQuota = m.DBSize, m.DBSizeInUse, m.DBSizeQuota
			ms.Healthy = len(m.Errors) == 0 && len(ms.Alarms) == 0
			ms.Message = strings.Join(m.Errors, "; ")
		} else {
			ms.Message = m.Err
		}
		if n := nodeByPeerOf(nodeByPeer, m.PeerURLs); n != nil && n.Status.DataDir != nil && n.Status.DataDir.Full {
			d := n.Status.DataDir
			full := fmt.Sprintf("data dir full: %d bytes free of %d", d.FreeBytes, d.SizeBytes)
			ms.Healthy = false
			ms.Message = strings.TrimPrefix(ms.Message+"; "+full, "; ")
		}
		ms.Leader = leader != 0 && m.ID == leader
		if p, ok := in.Progress[m.ID]; ok && m.Learner {
			ms.Progress, ms.ETA = p.Fraction, api.Duration(p.ETA)
		}
		if !m.Learner {
			st.Voters++
			if ms.Healthy {
				healthyVoters++
			}
		}
		st.Members = append(st.Members, ms)
	}
	for _, e := range in.Spec.Members {
		if !seenExternal[e.Name] {
			st.Members = append(st.Members, api.EtcdMemberStatus{Name: e.Name, Role: api.RoleExternal, Message: "declared, not a member yet"})
		}
	}
	for _, n := range in.Nodes {
		name := n.Metadata.Name
		if !n.HasRole(api.RoleControlPlane) || n.Status.Phase == api.NodeRemoved || hasMember[name] {
			continue
		}
		st.Members = append(st.Members, api.EtcdMemberStatus{Name: name, Node: name, Role: api.RoleStandby, Healthy: in.Alive[name]})
	}
	sort.SliceStable(st.Members, func(i, j int) bool { return st.Members[i].Name < st.Members[j].Name })
	st.Leader = names[leader]
	st.ClusterVersion = clusterVersion(in.Members)
	st.FaultTolerance = FaultTolerance(st.Voters, healthyVoters)
	for _, a := range in.Alarms {
		st.Alarms = append(st.Alarms, a.Type+" on "+orID(names[a.Member], a.Member))
	}
	sort.Strings(st.Alarms)
	st.Conditions = conditions(in, st)
	return st
}

func orID(name string, id api.MemberID) string {
	if name != "" {
		return name
	}
	return id.String()
}

// LeaderOf is the leader most reachable, error-free members agree on (0:
// none).
func LeaderOf(ms []etcdadmin.MemberStatus) api.MemberID {
	votes := map[api.MemberID]int{}
	for _, m := range ms {
		if m.Reachable && len(m.Errors) == 0 && m.Leader != 0 {
			votes[m.Leader]++
		}
	}
	var leader api.MemberID
	for id, n := range votes {
		if n > votes[leader] || (n == votes[leader] && id < leader) {
			leader = id
		}
	}
	return leader
}

// FaultTolerance is how many more voters a cluster of voters voting
// members, healthy of them healthy, can lose and keep quorum: the healthy
// voters beyond a quorum of all voters (voters/2+1), never below zero. With
// every voter healthy it is (voters-1)/2; each unhealthy voter takes one
// off, down to 0 at quorum or below it. Learners and standbys do not vote
// and do not count.
func FaultTolerance(voters, healthy int) int {
	if voters <= 0 {
		return 0
	}
	return max(0, healthy-(voters/2+1))
}

// clusterVersion is the lowest major.minor the reachable members run, as
// etcd decides its cluster version ("" when none answered).
func clusterVersion(ms []etcdadmin.MemberStatus) string {
	best := ""
	var bm, bn int
	for _, m := range ms {
		if !m.Reachable || m.Version == "" {
			continue
		}
		maj, min, ok := majorMinor(m.Version)
		if !ok {
			continue
		}
		if best == "" || maj < bm || (maj == bm && min < bn) {
			best, bm, bn = m.Version, maj, min
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("%d.%d.0", bm, bn)
}

func majorMinor(v string) (int, int, bool) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	a, err1 := strconv.Atoi(parts[0])
	b, err2 := strconv.Atoi(parts[1])
	return a, b, err1 == nil && err2 == nil
}

// conditions are Healthy, Reconciled and VersionSkew.
func conditions(in Input, st api.EtcdClusterStatus) []api.Condition {
	return []api.Condition{
		keep(in, healthy(in, st)),
		keep(in, reconciled(in, st)),
		keep(in, versionSkew(in, st)),
	}
}

// keep carries the previous condition's Since while its status holds.
func keep(in Input, c api.Condition) api.Condition {
	c.Since = in.Now
	for _, p := range in.Prev.Conditions {
		if p.Type == c.Type && p.Status == c.Status && !p.Since.IsZero() {
			c.Since = p.Since
		}
	}
	return c
}

func healthy(in Input, st api.EtcdClusterStatus) api.Condition {
	c := api.Condition{Type: api.CondHealthy, Status: true, Reason: "AllVotersHealthy"}
	var sick []string
	for _, m := range st.Members {
		if m.ID != 0 && !isLearner(in.Members, m.ID) && !m.Healthy {
			sick = append(sick, m.Name)
		}
	}
	switch {
	case st.Leader == "":
		c.Status, c.Reason, c.Message = false, "NoLeader", "no member reports a leader"
	case len(st.Alarms) > 0:
		c.Status, c.Reason, c.Message = false, "Alarm", strings.Join(st.Alarms, ", ")
	case len(sick) > 0:
		c.Status, c.Reason, c.Message = false, "UnhealthyVoters", strings.Join(sick, ", ")
	default:
		c.Message = fmt.Sprintf("%d voters healthy, can lose %d", st.Voters, st.FaultTolerance)
	}
	return c
}

func reconciled(in Input, st api.EtcdClusterStatus) api.Condition {
	c := api.Condition{Type: api.CondReconciled, Status: true, Reason: "AsDeclared"}
	want := in.Spec.Voters
	if want == 0 {
		want = api.DefaultVoters
	}
	var pending []string
	for _, m := range st.Members {
		if m.Role == api.RoleExternal && (m.ID == 0 || isLearner(in.Members, m.ID)) {
			pending = append(pending, m.Name)
		}
	}
	switch {
	case in.Active != "":
		c.Status, c.Reason, c.Message = false, "OperationInFlight", "operation "+in.Active+" is in flight"
	case st.Voters != want:
		c.Status, c.Reason, c.Message = false, "VoterCount", fmt.Sprintf("%d voters, spec.voters is %d", st.Voters, want)
	case len(pending) > 0:
		c.Status, c.Reason, c.Message = false, "ExternalPending", "external members not voters yet: "+strings.Join(pending, ", ")
	default:
		c.Message = fmt.Sprintf("%d voters as declared", want)
	}
	return c
}

func isLearner(ms []etcdadmin.MemberStatus, id api.MemberID) bool {
	for _, m := range ms {
		if m.ID == id {
			return m.Learner
		}
	}
	return false
}

func versionSkew(in Input, st api.EtcdClusterStatus) api.Condition {
	c := api.Condition{Type: api.CondVersionSkew, Status: false, Reason: "SameVersion"}
	var versions []string
	var off []string
	for _, m := range st.Members {
		if m.Version == "" {
			continue
		}
		if !slices.Contains(versions, m.Version) {
			versions = append(versions, m.Version)
		}
		if in.Spec.Version != "" && m.Role != api.RoleExternal && strings.TrimPrefix(m.Version, "v") != strings.TrimPrefix(in.Spec.Version, "v") {
			off = append(off, m.Name+" runs "+m.Version)
		}
	}
	sort.Strings(versions)
	switch {
	case len(versions) > 1:
		c.Status, c.Reason, c.Message = true, "MixedVersions", "members run "+strings.Join(versions, ", ")
	case len(off) > 0:
		c.Status, c.Reason, c.Message = true, "NotSpecVersion", fmt.Sprintf("spec.version is %s: %s", in.Spec.Version, strings.Join(off, ", "))
	case len(versions) == 1:
		c.Message = "every member runs " + versions[0]
	}
	return c
}

// nodeByPeerOf is the node whose peer URL is one of urls, nil for none.
func nodeByPeerOf(byPeer map[string]*api.Node, urls []string) *api.Node {
	for _, u := range urls {
		if n := byPeer[u]; n != nil {
			return n
		}
	}
	return nil
}
