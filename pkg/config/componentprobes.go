package config

import (
	"fmt"
	"net/url"
	"strconv"
)

// ComponentProbes are the URLs at which this control-plane machine's agent
// probes its own Kubernetes components, overriding a KubernetesCluster's
// spec.probes (a machine whose components listen elsewhere than the
// cluster says, several machines on one host). Empty keeps the cluster's.
type ComponentProbes struct {
	APIServerURL         string // "componentProbes.apiServerURL"
	ControllerManagerURL string // "componentProbes.controllerManagerURL"
	SchedulerURL         string // "componentProbes.schedulerURL"
}

// Names of the components, as pkg/api's ComponentAPIServer... (config
// imports no API package).
const (
	componentAPIServer         = "kube-apiserver"
	componentControllerManager = "kube-controller-manager"
	componentScheduler         = "kube-scheduler"
)

// URLs maps each component name (kube-apiserver, kube-controller-manager,
// kube-scheduler) whose URL is set to it.
func (c ComponentProbes) URLs() map[string]string {
	m := map[string]string{}
	for name, u := range map[string]string{
		componentAPIServer:         c.APIServerURL,
		componentControllerManager: c.ControllerManagerURL,
		componentScheduler:         c.SchedulerURL,
	} {
		if u != "" {
			m[name] = u
		}
	}
	return m
}

// componentProbeKeys are the agent's componentProbes.* keys, bound to c.
func componentProbeKeys(c *ComponentProbes) []key {
	return []key{
		stringKey("componentProbes.apiServerURL", &c.APIServerURL, "", "URL at which this machine's agent probes its own kube-apiserver (/readyz, checked with the cluster CA), instead of the KubernetesCluster's spec.probes.apiServer.url; empty keeps the cluster's", orEmpty(componentURL("https://127.0.0.1:6443/readyz"))),
		stringKey("componentProbes.controllerManagerURL", &c.ControllerManagerURL, "", "URL at which this machine's agent probes its own kube-controller-manager (/healthz), instead of the cluster's spec.probes.controllerManager.url; empty keeps the cluster's", orEmpty(componentURL("https://127.0.0.1:10257/healthz"))),
		stringKey("componentProbes.schedulerURL", &c.SchedulerURL, "", "URL at which this machine's agent probes its own kube-scheduler (/healthz), instead of the cluster's spec.probes.scheduler.url; empty keeps the cluster's", orEmpty(componentURL("https://127.0.0.1:10259/healthz"))),
	}
}

// componentURL accepts an http or https URL with a host and a port (a path,
// such as /readyz, allowed); example is shown in the error.
func componentURL(example string) func(string) error {
	return func(v string) error {
		reason := ""
		u, err := url.Parse(v)
		switch {
		case err != nil:
			reason = "it does not parse"
		case u.Scheme != "http" && u.Scheme != "https":
			reason = "the scheme is not http or https"
		case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
			reason = "it has no host"
		case u.User != nil:
			reason = "it has user information"
		case u.Fragment != "":
			reason = "it has a fragment"
		case u.Port() == "":
			reason = "it has no port"
		default:
			if n, err := strconv.Atoi(u.Port()); err != nil || n < 1 || n > 65535 {
				reason = "the port is not a number from 1 to 65535"
			}
		}
		if reason != "" {
			return fmt.Errorf("%q is not accepted: %s; use an http or https URL with a host and a port, e.g. %s, or leave it empty (the cluster's spec.probes)", v, reason, example)
		}
		return nil
	}
}
