package coordinator

import (
	"fmt"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeplan"
)

// Reasons of CondKubeconfigPublished.
const (
	reasonWaitingForPublisher = "WaitingForPublisher"
	reasonPublished           = "Published"
	reasonPublishFailed       = "PublishFailed"
)

// distributionKubeconfig judges the kubeconfig the distribution of kc
// writes (spec.kubeconfig.path), which the agent of its publisher
// (api.KubernetesCluster.KubeconfigPublisher) publishes and reports in r:
// the secret's name once published ("" before), and the
// CondKubeconfigPublished condition, naming the machine, the path and
// the error when it is not.
func distributionKubeconfig(kc *api.KubernetesCluster, r *api.KubeconfigReport) (string, kubeplan.Condition) {
	path := kc.Spec.Kubeconfig.Path
	c := kubeplan.Condition{Type: api.CondKubeconfigPublished}
	switch {
	case r == nil || r.Status.Path != path:
		c.Reason = reasonWaitingForPublisher
		c.Message = fmt.Sprintf("waiting for %s to publish %s", orNone(kc.KubeconfigPublisher()), path)
		return "", c
	case !r.Status.Published:
		c.Reason, c.Message = reasonPublishFailed, "not published: "+r.Status.Message
		return "", c
	}
	name := api.KubeconfigSecretName(kc.Metadata.Name)
	c.Status, c.Reason = true, reasonPublished
	c.Message = fmt.Sprintf("%s of %s published as secret %s, server %s", path, r.Status.Machine, name, r.Status.Server)
	return name, c
}

func orNone(s string) string {
	if s == "" {
		return "a ready control-plane machine"
	}
	return s
}
