package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/cobra"
)

// etcdClusterGetCmd is `nicoctl get etcdcluster`.
func (a *app) etcdClusterGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "etcdcluster",
		Aliases: []string{"etcdclusters", "ec"},
		Short:   "Show the EtcdCluster: voters, version, leader, fault tolerance, the external members' start values",
		Args:    cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return a.withEtcdCluster(cmd.Context(), func(ec *api.EtcdCluster) error {
				return a.emit(ec, func(w io.Writer) { a.etcdClusterTable(w, ec) })
			})
		}),
	}
}

// describeCmd is `nicoctl describe`.
func (a *app) describeCmd() *cobra.Command {
	ec := &cobra.Command{
		Use:     "etcdcluster",
		Aliases: []string{"etcdclusters", "ec"},
		Short:   "Describe the EtcdCluster: spec, policy, members with role, health, index and DB size, conditions, earlier cluster IDs",
		Args:    cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return a.withCluster(cmd.Context(), func(ctx context.Context, c *cluster) error {
				ec, err := getEtcdCluster(ctx, c)
				if err != nil {
					return err
				}
				lin := &api.ClusterLineage{}
				if err := c.st.Get(ctx, store.ClusterLineageKey, lin); err != nil && !errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("reading the ClusterLineage: %w", err)
				}
				decl, err := declaredLines(ctx, c, ec, ec.Spec)
				if err != nil {
					return err
				}
				claim := api.NewMachineClaim(api.EtcdClaimName)
				switch err := c.st.Get(ctx, store.MachineClaimKey(api.EtcdClaimName), claim); {
				case errors.Is(err, store.ErrNotFound):
					claim = nil
				case err != nil:
					return fmt.Errorf("reading the EtcdCluster's MachineClaim: %w", err)
				}
				return a.emit(ec, func(w io.Writer) {
					a.describeEtcdCluster(w, ec, lin)
					a.describeClaim(w, "Machine pool", ec.Spec.MachinePool, claim)
					printDeclared(w, decl)
				})
			})
		}),
	}
	return group("describe", "Describe an object in detail", "describe: etcdcluster or cluster", ec, a.clusterDescribeCmd())
}

// withEtcdCluster reads the EtcdCluster and runs fn with it.
func (a *app) withEtcdCluster(ctx context.Context, fn func(*api.EtcdCluster) error) error {
	return a.withCluster(ctx, func(ctx context.Context, c *cluster) error {
		ec, err := getEtcdCluster(ctx, c)
		if err != nil {
			return err
		}
		return fn(ec)
	})
}

// getEtcdCluster reads the EtcdCluster from the store; ExitNotFound when there is none.
func getEtcdCluster(ctx context.Context, c *cluster) (*api.EtcdCluster, error) {
	ec := &api.EtcdCluster{}
	err := c.st.Get(ctx, store.EtcdClusterKey, ec)
	if errors.Is(err, store.ErrNotFound) {
		return nil, withCode(ExitNotFound, errors.New("no EtcdCluster yet: the coordinator's leader writes one when it starts, or write one with 'nicoctl apply -f'"))
	}
	if err != nil {
		return nil, fmt.Errorf("reading the EtcdCluster: %w", err)
	}
	return ec, nil
}

// etcdClusterTable is the one-line summary, and the --initial-cluster
// values of the external members in flight.
func (a *app) etcdClusterTable(w io.Writer, ec *api.EtcdCluster) {
	s := ec.Status
	row(w, "NAME", "VOTERS", "VERSION", "CLUSTER VERSION", "LEADER", "FAULT TOLERANCE", "EXTERNAL", "AGE", "CONDITIONS")
	row(w, ec.Metadata.Name, fmt.Sprintf("%d/%d", s.Voters, ec.Spec.Voters), ec.Spec.Version, s.ClusterVersion, s.Leader,
		fmt.Sprintf("can lose %d", s.FaultTolerance), len(ec.Spec.Members), age(a.now(), ec.Metadata.CreatedAt), conditionCell(s.Conditions))
	if len(s.External) > 0 {
		fmt.Fprintln(w)
		row(w, "EXTERNAL MEMBER", "START WITH")
		for _, x := range s.External {
			row(w, x.Name, startFlags(x))
		}
	}
}

// startFlags are the etcd flags an external member must start with.
func startFlags(x api.ExternalMemberStart) string {
	return fmt.Sprintf("--name=%s --initial-cluster=%s --initial-cluster-state=%s", x.Name, x.InitialCluster, x.InitialClusterState)
}

// describeEtcdCluster writes the object for people, and the lineage: the
// etcd clusters the fleet ran as before its restores.
func (a *app) describeEtcdCluster(w io.Writer, ec *api.EtcdCluster, lin *api.ClusterLineage) {
	now := a.now()
	sp, st, p := ec.Spec, ec.Status, ec.Spec.Policy
	field(w, "Name", ec.Metadata.Name)
	field(w, "Created", stamp(now, ec.Metadata.CreatedAt))
	field(w, "Revision", ec.Metadata.Revision)
	fmt.Fprintln(w, "Spec:")
	field(w, "  Voters", sp.Voters)
	version := sp.Version
	if version == "" {
		version = "- (none: no version is rolled)"
	}
	field(w, "  Version", version)
	if len(sp.Members) == 0 {
		field(w, "  External members", "-")
	} else {
		fmt.Fprintln(w, "  External members:")
		row(w, "    NAME", "KIND", "PEER URLS", "CLIENT URLS")
		for _, m := range sp.Members {
			row(w, "    "+m.Name, m.Kind, strings.Join(m.PeerURLs, ","), strings.Join(m.ClientURLs, ","))
		}
	}
	fmt.Fprintln(w, "Policy:")
	unset := func(d api.Duration, zero string) string {
		if d == 0 {
			return zero
		}
		return time.Duration(d).String()
	}
	field(w, "  Learner start timeout", unset(p.LearnerStartTimeout, "- (the leader's setting)"))
	field(w, "  Learner progress timeout", unset(p.LearnerProgressTimeout, "- (the leader's setting)"))
	field(w, "  Health timeout", unset(p.HealthTimeout, "- (the leader's setting)"))
	field(w, "  Replace dead members after", unset(p.ReplaceDeadMembersAfter, "never"))
	if p.DefragFragmentation == 0 {
		field(w, "  Defragment at", "never")
	} else {
		field(w, "  Defragment at", fmt.Sprintf("%.0f%% fragmentation, databases over %s", 100*p.DefragFragmentation, bytesCell(p.DefragMinDBSize)))
	}
	field(w, "  Compaction keeps", compactionCell(p))
	if p.QuotaBackendBytes == 0 {
		field(w, "  Database quota", bytesCell(api.DefaultQuotaBackendBytes)+" (etcd's default)")
	} else {
		field(w, "  Database quota", bytesCell(p.QuotaBackendBytes))
	}
	describeSnapshots(w, now, sp.Snapshots, st.Snapshots)
	fmt.Fprintln(w, "Status:")
	field(w, "  Observed revision", st.ObservedRevision)
	field(w, "  Voters", fmt.Sprintf("%d (can lose %d)", st.Voters, st.FaultTolerance))
	field(w, "  Leader", st.Leader)
	field(w, "  Cluster version", st.ClusterVersion)
	field(w, "  Alarms", strings.Join(st.Alarms, ", "))
	if c := st.Compaction; c.Revision != 0 {
		field(w, "  Compacted", fmt.Sprintf("to revision %d %s (history since %s kept)", c.Revision, stamp(now, c.CompactedAt), c.RetainedSince.UTC().Format(time.RFC3339)))
	}
	if ep := st.NoSpace; ep != nil {
		field(w, "  Last NOSPACE", fmt.Sprintf("on %s %s, database %s of %s quota; compacted at revision %d, disarmed %s at %s",
			strings.Join(ep.Members, ","), stamp(now, ep.SeenAt), bytesCell(ep.DBSize), bytesCell(ep.DBSizeQuota), ep.CompactedAt,
			stamp(now, ep.DisarmedAt), bytesCell(ep.DBSizeAfter)))
	}
	field(w, "  Earlier clusters", lineageCell(lin))
	field(w, "  Updated", stamp(now, st.UpdatedAt))
	fmt.Fprintln(w, "Members:")
	if len(st.Members) == 0 {
		fmt.Fprintln(w, "  (none reported yet)")
	} else {
		row(w, "  NAME", "NODE", "ROLE", "HEALTH", "LEADER", "VERSION", "TERM", "INDEX", "APPLIED", "DB SIZE", "IN USE", "PROGRESS", "MESSAGE")
		for _, m := range st.Members {
			health, leader := "unhealthy", ""
			if m.Healthy {
				health = "healthy"
			}
			if m.Leader {
				leader = "*"
			}
			row(w, "  "+m.Name, m.Node, m.Role, health, leader, m.Version, zeroDash(m.RaftTerm), zeroDash(m.RaftIndex), zeroDash(m.AppliedIndex),
				bytesCell(m.DBSize), bytesCell(m.DBSizeInUse), progressCell(m), oneLine(m.Message))
		}
	}
	fmt.Fprintln(w, "Conditions:")
	if len(st.Conditions) == 0 {
		fmt.Fprintln(w, "  (none)")
	} else {
		row(w, "  TYPE", "STATUS", "REASON", "SINCE", "MESSAGE")
		for _, c := range st.Conditions {
			row(w, "  "+c.Type, c.Status, c.Reason, age(now, c.Since), oneLine(c.Message))
		}
	}
	if len(st.External) > 0 {
		fmt.Fprintln(w, "External members start with:")
		for _, x := range st.External {
			fmt.Fprintf(w, "  %s:\t%s\n", x.Name, startFlags(x))
		}
	}
}

// describeClaim writes the machines the cluster asked its machine pool
// for, where they run, and the claim's conditions (Spread: whether losing
// one host or domain keeps quorum).
func (a *app) describeClaim(w io.Writer, label, pool string, claim *api.MachineClaim) {
	if pool == "" && claim == nil {
		field(w, label, "- (none: the cluster asks no pool for VMs)")
		return
	}
	if claim == nil {
		field(w, label, pool+" (no machines asked for yet)")
		return
	}
	if pool == "" {
		pool = claim.Spec.Pool + " (no longer named: its machines are given back)"
	}
	field(w, label, pool)
	if len(claim.Status.Machines) == 0 && len(claim.Spec.Machines) == 0 {
		fmt.Fprintln(w, "  Machines asked for: -")
	} else {
		fmt.Fprintln(w, "  Machines asked for:")
		row(w, "    NAME", "HOST", "DOMAIN", "PHASE", "STATE")
		for _, m := range claim.Status.Machines {
			state := "listed"
			if m.Released {
				state = "released: being taken away"
			}
			row(w, "    "+m.Name, dash(m.Host), dash(m.Domain), dash(string(m.Phase)), state)
		}
	}
	if len(claim.Spec.SpreadWith) > 0 {
		field(w, "  Spread with", strings.Join(claim.Spec.SpreadWith, ", "))
	}
	for _, c := range claim.Status.Conditions {
		field(w, "  "+c.Type, fmt.Sprintf("%v %s %s", c.Status, c.Reason, oneLine(c.Message)))
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// stamp is a time and how long ago it was.
func stamp(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return fmt.Sprintf("%s (%s ago)", t.Format(time.RFC3339), age(now, t))
}

// zeroDash shows 0 as "-".
func zeroDash(n uint64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}

// bytesCell is a size in B, KiB, MiB or GiB ("" for 0).
func bytesCell(n int64) string {
	switch {
	case n <= 0:
		return ""
	case n < 1<<10:
		return fmt.Sprintf("%dB", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	}
}

// progressCell is a learner's catch-up progress and ETA.
func progressCell(m api.EtcdMemberStatus) string {
	if m.Role != api.RoleLearner || m.Progress == 0 {
		return ""
	}
	s := fmt.Sprintf("%.0f%%", 100*m.Progress)
	if m.ETA > 0 {
		s += fmt.Sprintf(" (ETA %s)", time.Duration(m.ETA).Round(time.Second))
	}
	return s
}

// lineageCell is the earlier cluster IDs, oldest first, on one line.
func lineageCell(lin *api.ClusterLineage) string {
	ids := lin.IDs()
	if len(ids) == 0 {
		return "- (none: no restore recorded)"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = id.String()
	}
	return strings.Join(s, ", ") + " (oldest first; their snapshots still verify and restore)"
}

// compactionCell says what history the policy keeps.
func compactionCell(p api.EtcdPolicy) string {
	if p.CompactionDisabled {
		return "off (spec.policy.compactionDisabled: nico compacts nothing)"
	}
	keep := "1h0m0s (the default)"
	if p.CompactionRetention != 0 {
		keep = time.Duration(p.CompactionRetention).String()
	}
	if p.CompactionMinRevisions > 0 {
		keep += fmt.Sprintf(", and at least the newest %d revisions", p.CompactionMinRevisions)
	}
	return keep
}
