package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/events"
	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/cobra"
)

// clusterDescribeCmd is `nicoctl describe cluster NAME`.
func (a *app) clusterDescribeCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "cluster NAME",
		Aliases: []string{"clusters", "kubernetescluster", "kc"},
		Short:   "Describe a KubernetesCluster: spec, machines and components, conditions and events in time order",
		Args:    cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return a.withCluster(cmd.Context(), func(ctx context.Context, c *cluster) error {
				kc, err := getKubernetesCluster(ctx, c.st, args[0])
				if err != nil {
					return err
				}
				evs, err := a.clusterEvents(ctx, c, kc)
				if err != nil {
					return err
				}
				decl, err := declaredLines(ctx, c, kc, kc.Spec)
				if err != nil {
					return err
				}
				claims := map[string]*api.MachineClaim{}
				for _, plane := range []string{api.PlaneControl, api.PlaneData} {
					name := api.KubernetesPlaneClaimName(kc.Metadata.Name, plane)
					cl := api.NewMachineClaim(name)
					switch err := c.st.Get(ctx, store.MachineClaimKey(name), cl); {
					case errors.Is(err, store.ErrNotFound):
					case err != nil:
						return fmt.Errorf("reading the MachineClaim %s: %w", name, err)
					default:
						claims[plane] = cl
					}
				}
				return a.emit(kc, func(w io.Writer) {
					a.describeKubernetesCluster(w, kc, evs)
					a.describeClaim(w, "Control-plane machine pool", kc.Spec.ControlPlane.MachinePool, claims[api.PlaneControl])
					a.describeClaim(w, "Data-plane machine pool", kc.Spec.DataPlane.MachinePool, claims[api.PlaneData])
					printDeclared(w, decl)
				})
			})
		}),
	}
}

// clusterEvents are the events of kc and of its Rollout, oldest first.
func (a *app) clusterEvents(ctx context.Context, c *cluster, kc *api.KubernetesCluster) ([]events.Event, error) {
	backlog, bad, err := events.NewFeed(c.st, a.now).Backlog(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the events: %w", err)
	}
	a.skipped(bad...)
	var out []events.Event
	for _, e := range backlog {
		if (e.Kind == api.KindKubernetesCluster && e.Name == kc.Metadata.Name) ||
			(e.Kind == api.KindRollout && kc.Status.Rollout != "" && e.Name == kc.Status.Rollout) {
			out = append(out, e)
		}
	}
	return out, nil
}

// describeKubernetesCluster writes the cluster for people.
func (a *app) describeKubernetesCluster(w io.Writer, kc *api.KubernetesCluster, evs []events.Event) {
	now := a.now()
	sp, st, md := kc.Spec, kc.Status, kc.Metadata
	field(w, "Name", md.Name)
	field(w, "Created", stamp(now, md.CreatedAt))
	gen := fmt.Sprint(md.Generation)
	if st.ObservedGeneration != md.Generation {
		gen += fmt.Sprintf(" (the controller has seen %d)", st.ObservedGeneration)
	}
	field(w, "Generation", gen)
	if md.DeletionTimestamp != nil {
		field(w, "Deletion requested", stamp(now, *md.DeletionTimestamp))
	}
	field(w, "Phase", st.Phase)
	field(w, "Message", oneLine(st.Message))
	fmt.Fprintln(w, "Spec:")
	repo := sp.GitRepo
	if repo == "" {
		repo = "- (the coordinator's default repository)"
	}
	field(w, "  Repository", repo)
	field(w, "  Configuration subdir", sp.ConfigurationSubdir)
	field(w, "  Credentials", sp.CredentialsRef)
	field(w, "  Version", versionCell(kc))
	endpoint := sp.ControlPlaneEndpoint
	if endpoint == "" {
		endpoint = "- (the first ready control-plane machine's address)"
		if st.ControlPlaneEndpoint != "" {
			endpoint = st.ControlPlaneEndpoint + " (default: the first ready control-plane machine)"
		}
	}
	field(w, "  Control-plane endpoint", endpoint)
	field(w, "  etcd", etcdCell(kc))
	field(w, "  Control plane", machineSetCell(sp.ControlPlane.MachineSet))
	field(w, "  Data plane", machineSetCell(sp.DataPlane.MachineSet))
	for _, part := range api.Parts {
		if c := sp.Component(part); !reflect.DeepEqual(c, api.ComponentSpec{}) {
			field(w, "  "+part.Binary(), componentCell(c, sp.Version))
		}
	}
	field(w, "  Rollout", rolloutCell(sp.Rollout))
	p := sp.EffectiveProbes().WithDefaults()
	field(w, "  Probes", fmt.Sprintf("every %s, timeout %s", time.Duration(p.Interval), time.Duration(p.Timeout)))
	for _, c := range []struct {
		name  string
		probe *api.ComponentProbe
		ca    string
	}{{"    API server", p.APIServer, "the cluster CA"}, {"    Controller-manager", p.ControllerManager, "its own serving certificate"}, {"    Scheduler", p.Scheduler, "its own serving certificate"}} {
		field(w, c.name, probeCell(c.probe, c.ca))
	}
	drain := "- (machines are released without draining)"
	if sp.Drain != nil {
		drain = strings.Join(sp.Drain.Command, " ")
		if sp.Drain.Timeout != 0 {
			drain += fmt.Sprintf(" (timeout %s)", time.Duration(sp.Drain.Timeout))
		}
	}
	field(w, "  Drain", drain)
	kubeconfig := "written by the leader from the cluster CA"
	if sp.Kubeconfig.Path != "" {
		kubeconfig = "published from " + sp.Kubeconfig.Path + " on a control-plane machine, server rewritten"
	}
	field(w, "  Kubeconfig", kubeconfig)
	fmt.Fprintln(w, "Status:")
	field(w, "  Control plane", replicaCell(st.ControlPlane))
	field(w, "  Data plane", replicaCell(st.DataPlane))
	field(w, "  Kubeconfig secret", st.KubeconfigSecret)
	field(w, "  Rollout", st.Rollout)
	field(w, "  Updated", stamp(now, st.UpdatedAt))
	fmt.Fprintln(w, "Components:")
	if len(st.Components) == 0 {
		fmt.Fprintln(w, "  (none reported yet)")
	} else {
		row(w, "  NAME", "READY", "READY ON", "LEADER", "MESSAGE")
		for _, c := range st.Components {
			row(w, "  "+c.Name, readyTotal(c.ReplicaStatus), strings.Join(c.ReadyMachines, ","), c.Leader, oneLine(c.Message))
		}
	}
	fmt.Fprintln(w, "Conditions:")
	if len(st.Conditions) == 0 {
		fmt.Fprintln(w, "  (none)")
	} else {
		row(w, "  TYPE", "STATUS", "REASON", "SINCE", "MESSAGE")
		for _, c := range orderedConditions(st.Conditions) {
			row(w, "  "+c.Type, c.Status, c.Reason, age(now, c.LastTransitionTime), oneLine(c.Message))
		}
	}
	fmt.Fprintln(w, "Events:")
	if len(evs) == 0 {
		fmt.Fprintln(w, "  (none)")
		return
	}
	row(w, "  TIME", "TYPE", "OBJECT", "REASON", "MESSAGE")
	for _, e := range evs {
		row(w, "  "+e.Time.UTC().Format("2006-01-02T15:04:05.000Z"), e.Type, e.Object(), e.Reason, oneLine(e.Message))
	}
}

// orderedConditions are the conditions in dependency order (the known
// types first, as api.ClusterConditionTypes lists them).
func orderedConditions(cs []api.ClusterCondition) []api.ClusterCondition {
	out := slices.Clone(cs)
	rank := func(t string) int {
		if i := slices.Index(api.ClusterConditionTypes, t); i >= 0 {
			return i
		}
		return len(api.ClusterConditionTypes)
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i].Type) < rank(out[j].Type) })
	return out
}

// etcdCell says where the cluster's data lives.
func etcdCell(kc *api.KubernetesCluster) string {
	e := kc.Spec.Etcd
	switch e.ProviderOrDefault() {
	case api.EtcdProviderExternal:
		if e.External == nil {
			return "external"
		}
		return fmt.Sprintf("external: %s (client identity in secret %s)", strings.Join(e.External.Endpoints, ","), e.External.SecretRef)
	case api.EtcdProviderDistribution:
		return "distribution: the flake's own datastore; nico orders the control-plane joins"
	default:
		if e.Namespace {
			return "nico: the fleet's etcd, through each server's namespacing proxy, namespace " + api.ClusterEtcdNamespace(kc.Metadata.Name)
		}
		return "nico: the fleet's etcd, prefix " + api.ClusterEtcdPrefix(kc.Metadata.Name)
	}
}

// machineSetCell says how a plane's machines are chosen.
func machineSetCell(m api.MachineSet) string {
	switch {
	case len(m.Machines) > 0:
		return "machines " + strings.Join(m.Machines, ", ")
	case m.MachineSelector != nil:
		var pairs []string
		for k, v := range m.MachineSelector.MatchLabels {
			pairs = append(pairs, k+"="+v)
		}
		sort.Strings(pairs)
		sel := strings.Join(pairs, ",")
		if sel == "" {
			sel = "any label"
		}
		if m.MachinePool != "" {
			return fmt.Sprintf("%d machines: free ones matching %s, VMs from pool %s for the rest", m.Count, sel, m.MachinePool)
		}
		return fmt.Sprintf("%d free machines matching %s", m.Count, sel)
	case m.MachinePool != "":
		return fmt.Sprintf("%d VMs from pool %s", m.Count, m.MachinePool)
	}
	return "none"
}

// rolloutCell is the rollout knobs with their defaults.
func rolloutCell(r api.ClusterRollout) string {
	mu := r.MaxUnavailable
	if mu == "" {
		mu = "1"
	}
	step := "10m0s"
	if r.StepTimeout != 0 {
		step = time.Duration(r.StepTimeout).String()
	}
	s := fmt.Sprintf("data plane %s at a time, control plane 1; step timeout %s", mu, step)
	if r.Paused {
		s += "; paused"
	}
	return s
}

// probeCell is one component's probe.
func probeCell(p *api.ComponentProbe, ca string) string {
	if p.Disabled {
		return "not probed"
	}
	if p.CAFile != "" {
		ca = p.CAFile
	}
	s := p.URL + " checked with " + ca
	if p.LeaderLease != "" {
		s += "; leader lease " + p.LeaderLease
	}
	return s
}

// replicaCell is "2/3 ready (cp-1, cp-2) of cp-1, cp-2, cp-3".
func replicaCell(r api.ReplicaStatus) string {
	s := readyTotal(r) + " ready"
	if len(r.ReadyMachines) > 0 {
		s += " (" + strings.Join(r.ReadyMachines, ", ") + ")"
	}
	if len(r.Machines) > 0 {
		s += " of " + strings.Join(r.Machines, ", ")
	}
	return s
}

// componentCell is a component's provider, version, extra flags and
// limits on one line.
func componentCell(c api.ComponentSpec, clusterVersion string) string {
	parts := []string{string(c.ProviderOrDefault())}
	if c.External != nil {
		parts[0] += " at " + c.External.URL
	}
	if v := c.VersionOr(clusterVersion); v != "" {
		parts = append(parts, "version "+v)
	}
	if len(c.ExtraArgs) > 0 {
		var args []string
		for k, v := range c.ExtraArgs {
			args = append(args, "--"+k+"="+v)
		}
		slices.Sort(args)
		parts = append(parts, strings.Join(args, " "))
	}
	limits := c.Resources.SystemdLimits()
	for _, k := range []string{"CPUQuota", "MemoryMax"} {
		if v, ok := limits[k]; ok {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, ", ")
}
