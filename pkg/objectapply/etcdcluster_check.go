package objectapply

import (
	"errors"
	"fmt"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdversion"
)

// checkAgainst refuses what spec cannot be given the cluster as it is: a
// version change that is no path etcd supports (from the stored
// spec.version and from every version the members run), and an external
// member whose name or URLs etcd or a registered node already has (unless
// the stored spec already declared that very member). Each error is a
// *api.FieldError naming the field.
func checkAgainst(spec api.EtcdClusterSpec, f clusterFacts) error {
	var errs []error
	errs = append(errs, checkVersionPath(spec, f)...)
	errs = append(errs, checkExternalMembers(spec, f)...)
	return errors.Join(errs...)
}

// checkVersionPath checks a changed spec.version as a path from the
// stored spec.version, and from each version the members run.
func checkVersionPath(spec api.EtcdClusterSpec, f clusterFacts) []error {
	if spec.Version == "" || (f.stored != nil && f.stored.Spec.Version == spec.Version) {
		return nil
	}
	type source struct{ what, version string }
	var froms []source
	if f.stored != nil && f.stored.Spec.Version != "" {
		froms = append(froms, source{"the stored spec.version", f.stored.Spec.Version})
	}
	for _, v := range uniq(f.running) {
		froms = append(froms, source{"a member's running version", v})
	}
	if len(froms) == 0 && f.stored != nil && f.stored.Status.ClusterVersion != "" {
		froms = append(froms, source{"the cluster version", f.stored.Status.ClusterVersion})
	}
	var errs []error
	for _, from := range froms {
		_, err := etcdversion.CheckStrings(from.version, spec.Version)
		if err == nil {
			continue
		}
		fe := &api.FieldError{Field: "spec.version", Value: spec.Version,
			Reason:   fmt.Sprintf("from %s %s: %v", from.what, from.version, err),
			Accepted: "keep the version, or choose a step etcd supports: a patch within the minor, one minor up from its latest patch, or one minor down to its latest patch"}
		var pe *etcdversion.PathError
		if errors.As(err, &pe) {
			fe.Reason = fmt.Sprintf("from %s %s: %s", from.what, from.version, pe.Reason)
			if pe.Next != "" {
				fe.Accepted = pe.Next
			}
		}
		errs = append(errs, fe)
	}
	return errs
}

// versionStep names the step a spec.version change takes from the stored
// one, for the apply's message ("" when there is none to name).
func versionStep(spec api.EtcdClusterSpec, f clusterFacts) string {
	from := ""
	switch {
	case spec.Version == "":
		return ""
	case f.stored != nil && f.stored.Spec.Version != "":
		from = f.stored.Spec.Version
	case len(f.running) > 0:
		from = uniq(f.running)[0]
	default:
		return ""
	}
	step, err := etcdversion.CheckStrings(from, spec.Version)
	if err != nil || step.Kind == etcdversion.KindNone {
		return ""
	}
	return step.String()
}

// checkExternalMembers refuses an external member that etcd or a
// registered node already has, unless the stored spec declared the same
// member (name and URL) before: that one is nico's to on-board.
func checkExternalMembers(spec api.EtcdClusterSpec, f clusterFacts) []error {
	declared := map[string]bool{} // name + " " + url of the stored spec's external members
	if f.stored != nil {
		for _, m := range f.stored.Spec.Members {
			for _, u := range append(append([]string(nil), m.PeerURLs...), m.ClientURLs...) {
				declared[m.Name+" "+norm(u)] = true
			}
		}
	}
	owner := map[string]string{} // URL -> who has it
	names := map[string]string{} // name -> who has it
	for _, m := range f.members {
		who := "etcd member " + m.ID.String()
		if l := Label(m); l != m.ID.String() {
			who = fmt.Sprintf("etcd member %s (%s)", l, m.ID)
		}
		for _, u := range append(append([]string(nil), m.PeerURLs...), m.ClientURLs...) {
			owner[norm(u)] = who
		}
		if m.Name != "" {
			names[m.Name] = who
		}
	}
	for _, n := range f.nodes {
		who := "registered node " + n.Metadata.Name
		for _, u := range []string{n.Spec.PeerURL, n.Spec.ClientURL} {
			if u != "" && owner[norm(u)] == "" {
				owner[norm(u)] = who
			}
		}
		names[n.Metadata.Name] = who
	}
	var errs []error
	for i, m := range spec.Members {
		at := fmt.Sprintf("spec.members[%d]", i)
		wasDeclared := false
		for _, u := range m.PeerURLs {
			wasDeclared = wasDeclared || declared[m.Name+" "+norm(u)]
		}
		if who := names[m.Name]; who != "" && !wasDeclared {
			errs = append(errs, &api.FieldError{Field: at + ".name", Value: m.Name, Reason: "already the name of " + who,
				Accepted: "name a member etcd does not have yet"})
		}
		for _, list := range []struct {
			name, noun string
			urls       []string
		}{{"peerURLs", "peer URL", m.PeerURLs}, {"clientURLs", "client URL", m.ClientURLs}} {
			for j, u := range list.urls {
				who := owner[norm(u)]
				if who == "" || declared[m.Name+" "+norm(u)] {
					continue
				}
				errs = append(errs, &api.FieldError{Field: fmt.Sprintf("%s.%s[%d]", at, list.name, j), Value: u,
					Reason:   "already the " + list.noun + " of " + who,
					Accepted: "declare an external member with URLs no member or registered node has (nico's own members come from their registered nodes)"})
			}
		}
	}
	return errs
}
