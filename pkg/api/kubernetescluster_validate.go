package api

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/kubeversion"
)

// MaxClusterNameLen bounds a cluster's name so that the longest name made
// from it, "<name>-apiserver-etcd-client", stays a 63-character label.
const MaxClusterNameLen = 40

// DecodeKubernetesCluster decodes a KubernetesCluster from JSON, strictly
// (DecodeStrict), and checks it (Validate): every problem at once (a
// value of the wrong type, or bad JSON, ends the check there). A
// deprecated apiVersion is kept: UpgradeAPIVersions reports and replaces it.
func DecodeKubernetesCluster(data []byte) (*KubernetesCluster, error) {
	c := &KubernetesCluster{}
	unknown, fatal := decodeStrict(data, c)
	if fatal != nil {
		return nil, errors.Join(append(unknown, fatal)...)
	}
	if err := errors.Join(append(unknown, c.Validate())...); err != nil {
		return nil, err
	}
	return c, nil
}

var (
	// dnsLabelRE is an RFC 1123 label, as Kubernetes names objects.
	dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// dnsSubdomainRE is dot-separated labels (lower case).
	dnsSubdomainRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	// hostnameRE is a DNS name in any case.
	hostnameRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*\.?$`)
	// labelNameRE is a label key's name part and a label value.
	labelNameRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	// secretNameRE is what a named secret may be called.
	secretNameRE = memberNameRE
)

// Validate checks the object on its own: apiVersion, kind, name and every
// spec field. It returns every problem joined, each a *FieldError naming
// its path. Status is not checked: the controller writes it.
func (c *KubernetesCluster) Validate() error {
	var errs []error
	if _, err := CheckAPIVersion(ClusterAPIVersion, c.APIVersion); err != nil {
		errs = append(errs, err)
	}
	if c.Kind != KindKubernetesCluster {
		errs = append(errs, &FieldError{Field: "kind", Value: c.Kind, Accepted: "use " + KindKubernetesCluster})
	}
	if n := c.Metadata.Name; !dnsLabelRE.MatchString(n) || len(n) > MaxClusterNameLen {
		errs = append(errs, &FieldError{Field: "metadata.name", Value: n,
			Accepted: fmt.Sprintf("use 1 to %d lower-case letters, digits and '-', starting and ending with a letter or digit", MaxClusterNameLen)})
	}
	if c.Metadata.Generation < 0 {
		errs = append(errs, &FieldError{Field: "metadata.generation", Value: c.Metadata.Generation, Accepted: "leave it out (nicoctl counts it)"})
	}
	errs = append(errs, c.Spec.Validate()...)
	return errors.Join(errs...)
}

// Validate checks the spec on its own and returns each problem as a
// *FieldError.
func (s KubernetesClusterSpec) Validate() []error {
	var errs []error
	bad := func(field string, v any, reason, accepted string) {
		errs = append(errs, &FieldError{Field: field, Value: v, Reason: reason, Accepted: accepted})
	}
	if s.GitRepo != "" && strings.TrimSpace(s.GitRepo) != s.GitRepo {
		bad("spec.gitRepo", s.GitRepo, "leading or trailing space", "give the repository's URL, or leave it out for the coordinator's default")
	}
	if d := s.ConfigurationSubdir; d != "" && (path.IsAbs(d) || path.Clean(d) != strings.TrimSuffix(d, "/") || strings.HasPrefix(path.Clean(d), "..")) {
		bad("spec.configurationSubdir", d, "", "give a clean relative directory inside the repository, as k3s or clusters/prod")
	}
	if r := s.CredentialsRef; r != "" && !secretNameRE.MatchString(r) {
		bad("spec.credentialsRef", r, "", "name a secret: 1 to 63 letters, digits, '.', '_' and '-'")
	}
	errs = append(errs, s.ControlPlane.validate("spec.controlPlane", true)...)
	errs = append(errs, s.DataPlane.validate("spec.dataPlane", false)...)
	for i, m := range s.DataPlane.Machines {
		if slices.Contains(s.ControlPlane.Machines, m) {
			bad(fmt.Sprintf("spec.dataPlane.machines[%d]", i), m, "also in spec.controlPlane.machines", "give each machine one role")
		}
	}
	if s.Version != "" {
		if v, err := kubeversion.Parse(s.Version); err != nil {
			bad("spec.version", s.Version, "not MAJOR.MINOR.PATCH", "use a Kubernetes release as 1.37.2 (minors "+kubeversion.Minors()+"), or leave it out")
		} else if err := kubeversion.CheckKnown(v); err != nil {
			bad("spec.version", s.Version, "Kubernetes "+v.MinorString()+" is not in nico's version table", "use a release of "+kubeversion.Minors())
		}
	}
	if e := s.ControlPlaneEndpoint; e != "" {
		if why := checkEndpoint(e); why != "" {
			bad("spec.controlPlaneEndpoint", e, why, "give host or host:port, the host an IP address or DNS name, as 10.0.0.100 or k8s.example.org:6443")
		}
	}
	errs = append(errs, s.validateComponents()...)
	errs = append(errs, s.Etcd.validate()...)
	errs = append(errs, s.Rollout.validate()...)
	errs = append(errs, s.Probes.validate()...)
	if d := s.Drain; d != nil {
		if len(d.Command) == 0 || d.Command[0] == "" {
			bad("spec.drain.command", d.Command, "empty", `give the program and its arguments, as ["kubectl", "drain", "--ignore-daemonsets"], or leave spec.drain out`)
		}
		if d.Timeout < 0 {
			bad("spec.drain.timeout", d.Timeout, "negative", "use 0 (10 minutes) or a positive duration")
		}
	}
	if p := s.Kubeconfig.Path; p != "" && (!path.IsAbs(p) || path.Clean(p) != p) {
		bad("spec.kubeconfig.path", p, "", "give a clean absolute path on the control-plane machines, as /etc/rancher/k3s/k3s.yaml, or leave it out")
	}
	return errs
}

// validate checks one plane's machine set.
func (m MachineSet) validate(at string, required bool) []error {
	var errs []error
	bad := func(field string, v any, reason, accepted string) {
		errs = append(errs, &FieldError{Field: field, Value: v, Reason: reason, Accepted: accepted})
	}
	if required && m.Empty() {
		bad(at, "{}", "the cluster needs at least one control-plane machine", "give machines (names), or machineSelector.matchLabels and count, or machinePool and count")
	}
	if err := validatePoolName(at+".machinePool", m.MachinePool); err != nil {
		errs = append(errs, err)
	}
	if len(m.Machines) > 0 && m.MachinePool != "" {
		bad(at+".machinePool", m.MachinePool, "given beside machines", "give either machines (explicit names) or machinePool with count, not both")
	}
	if len(m.Machines) > 0 && m.MachineSelector != nil {
		bad(at+".machineSelector", m.MachineSelector.MatchLabels, "given beside machines", "give either machines (explicit names) or machineSelector with count, not both")
	}
	if len(m.Machines) > 0 && m.Count != 0 {
		bad(at+".count", m.Count, "given beside machines", "leave count out with machines: the list's length is the count")
	}
	seen := map[string]int{}
	for i, name := range m.Machines {
		f := fmt.Sprintf("%s.machines[%d]", at, i)
		if j, dup := seen[name]; dup {
			bad(f, name, fmt.Sprintf("already %s.machines[%d]", at, j), "name each machine once")
			continue
		}
		seen[name] = i
		if name == "" || strings.Contains(name, "/") || strings.TrimSpace(name) != name {
			bad(f, name, "", "name a machine: non-empty, no '/' and no spaces")
		}
	}
	switch {
	case m.Count < 0:
		bad(at+".count", m.Count, "negative", "use a count of 1 or more with machineSelector")
	case m.MachineSelector != nil && len(m.Machines) == 0 && m.Count == 0:
		bad(at+".count", m.Count, "a selector with no count selects no machine", "use a count of 1 or more")
	case m.MachinePool != "" && len(m.Machines) == 0 && m.Count == 0:
		bad(at+".count", m.Count, "a machine pool with no count asks for no machine", "use a count of 1 or more")
	case m.MachineSelector == nil && m.MachinePool == "" && len(m.Machines) == 0 && m.Count > 0:
		bad(at+".count", m.Count, "no machineSelector to count machines of", "give machineSelector.matchLabels (matchLabels: {} matches every free machine) or machinePool beside count")
	}
	if m.MachineSelector != nil {
		errs = append(errs, validateLabels(at+".machineSelector.matchLabels", m.MachineSelector.MatchLabels)...)
	}
	return errs
}

// validateLabels checks keys and values by Kubernetes' label syntax.
func validateLabels(at string, labels map[string]string) []error {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var errs []error
	for _, k := range keys {
		if why := checkLabelKey(k); why != "" {
			errs = append(errs, &FieldError{Field: at, Value: k, Reason: "key " + why,
				Accepted: "use a key [prefix/]name: name 1 to 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit; prefix a lower-case DNS subdomain of up to 253 characters"})
		}
		if v := labels[k]; v != "" && (len(v) > 63 || !labelNameRE.MatchString(v)) {
			errs = append(errs, &FieldError{Field: at + "[" + k + "]", Value: v,
				Accepted: "use a value of 0 to 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit"})
		}
	}
	return errs
}

// checkLabelKey returns why k is not a label key, or "".
func checkLabelKey(k string) string {
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	switch {
	case hasPrefix && (prefix == "" || len(prefix) > 253 || !dnsSubdomainRE.MatchString(prefix)):
		return "prefix is not a lower-case DNS subdomain"
	case name == "":
		return "has no name"
	case len(name) > 63:
		return "name is longer than 63 characters"
	case !labelNameRE.MatchString(name):
		return "name has a character outside letters, digits, '-', '_' and '.', or does not start and end with a letter or digit"
	}
	return ""
}

// checkEndpoint returns why e is not host or host:port, or "".
func checkEndpoint(e string) string {
	host := e
	if strings.Contains(e, "://") {
		return "a URL; give the address alone"
	}
	if h, p, err := net.SplitHostPort(e); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "port is not 1 to 65535"
		}
		host = h
	} else if strings.Count(e, ":") > 1 && net.ParseIP(e) != nil {
		return "" // a bare IPv6 address
	}
	if net.ParseIP(host) != nil || (len(host) <= 253 && hostnameRE.MatchString(host)) {
		return ""
	}
	return "the host is not an IP address or DNS name"
}

// validate checks the etcd provider and its external endpoints.
func (e ClusterEtcd) validate() []error {
	var errs []error
	bad := func(field string, v any, reason, accepted string) {
		errs = append(errs, &FieldError{Field: field, Value: v, Reason: reason, Accepted: accepted})
	}
	if e.Provider != "" && !slices.Contains(EtcdProviders, e.Provider) {
		bad("spec.etcd.provider", string(e.Provider), "", "use nico (the default: the fleet's etcd), external (endpoints and a secret) or distribution (the flake's own datastore)")
	}
	if e.Namespace && e.ProviderOrDefault() != EtcdProviderNico {
		bad("spec.etcd.namespace", true, "given with provider "+string(e.ProviderOrDefault()), "leave spec.etcd.namespace out, or set spec.etcd.provider: nico (the namespacing proxy runs on nico's etcd)")
	}
	switch {
	case e.ProviderOrDefault() == EtcdProviderExternal && e.External == nil:
		bad("spec.etcd.external", "null", "provider external needs it", "give spec.etcd.external.endpoints and secretRef")
	case e.ProviderOrDefault() != EtcdProviderExternal && e.External != nil:
		bad("spec.etcd.external", e.External.Endpoints, "given with provider "+string(e.ProviderOrDefault()), "leave spec.etcd.external out, or set spec.etcd.provider: external")
	case e.External != nil:
		if len(e.External.Endpoints) == 0 {
			bad("spec.etcd.external.endpoints", "[]", "empty", "list at least one client URL, as https://10.0.0.9:2379")
		}
		for i, u := range e.External.Endpoints {
			if why := checkMemberURL(u); why != "" {
				bad(fmt.Sprintf("spec.etcd.external.endpoints[%d]", i), u, why, "use an http or https URL with a host and port and no path, as https://10.0.0.9:2379")
			}
		}
		if !secretNameRE.MatchString(e.External.SecretRef) {
			bad("spec.etcd.external.secretRef", e.External.SecretRef, "", "name the secret with keys ca.crt, tls.crt and tls.key: 1 to 63 letters, digits, '.', '_' and '-'")
		}
	}
	return errs
}

// validate checks the rollout knobs as the Rollout would.
func (r ClusterRollout) validate() []error {
	var errs []error
	if _, err := (RolloutSpec{MaxUnavailable: r.MaxUnavailable}).BatchSize(1); err != nil {
		errs = append(errs, &FieldError{Field: "spec.rollout.maxUnavailable", Value: r.MaxUnavailable, Accepted: "use a number >= 1 or a percentage 1%..100%, or leave it out (1)"})
	}
	if r.StepTimeout != 0 && time.Duration(r.StepTimeout) < time.Second {
		errs = append(errs, &FieldError{Field: "spec.rollout.stepTimeout", Value: r.StepTimeout, Accepted: "use 0 (10 minutes) or at least 1s"})
	}
	return errs
}

// validate checks each component probe and the timing.
func (p ClusterProbes) validate() []error {
	var errs []error
	for _, c := range []struct {
		name  string
		probe *ComponentProbe
	}{{"apiServer", p.APIServer}, {"controllerManager", p.ControllerManager}, {"scheduler", p.Scheduler}} {
		if c.probe == nil {
			continue
		}
		at := "spec.probes." + c.name
		if u := c.probe.URL; u != "" {
			pu, err := url.Parse(u)
			if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
				errs = append(errs, &FieldError{Field: at + ".url", Value: u, Accepted: "use an http or https URL on the machine, as https://127.0.0.1:6443/readyz"})
			}
		}
		if f := c.probe.CAFile; f != "" && (!path.IsAbs(f) || path.Clean(f) != f) {
			errs = append(errs, &FieldError{Field: at + ".caFile", Value: f, Accepted: "give a clean absolute path on the machine, or leave it out"})
		}
		if l := c.probe.LeaderLease; l != "" {
			ns, name, ok := strings.Cut(l, "/")
			if !ok || !dnsLabelRE.MatchString(ns) || !dnsSubdomainRE.MatchString(name) {
				errs = append(errs, &FieldError{Field: at + ".leaderLease", Value: l, Accepted: "use namespace/name, as kube-system/kube-scheduler"})
			}
		}
	}
	if p.Interval != 0 && time.Duration(p.Interval) < time.Second {
		errs = append(errs, &FieldError{Field: "spec.probes.interval", Value: p.Interval, Accepted: "use 0 (10s) or at least 1s"})
	}
	if p.Timeout < 0 || (p.Timeout != 0 && time.Duration(p.Timeout) < 100*time.Millisecond) {
		errs = append(errs, &FieldError{Field: "spec.probes.timeout", Value: p.Timeout, Accepted: "use 0 (5s) or at least 100ms"})
	}
	return errs
}
