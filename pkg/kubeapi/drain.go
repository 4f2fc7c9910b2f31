package kubeapi

import (
	"context"
	"errors"
	"net/url"
	"time"
)

// Pod is a pod a drain of its node evicts.
type Pod struct {
	Namespace, Name string
	// Terminating: it is being deleted (evicted already).
	Terminating bool
}

// String is namespace/name.
func (p Pod) String() string { return p.Namespace + "/" + p.Name }

type podList struct {
	Items []struct {
		Metadata struct {
			Namespace         string            `json:"namespace"`
			Name              string            `json:"name"`
			Annotations       map[string]string `json:"annotations"`
			DeletionTimestamp *time.Time        `json:"deletionTimestamp"`
			OwnerReferences   []struct {
				Kind       string `json:"kind"`
				Controller bool   `json:"controller"`
			} `json:"ownerReferences"`
		} `json:"metadata"`
		Status struct {
			Phase string `json:"phase"`
		} `json:"status"`
	} `json:"items"`
}

// mirrorAnnotation marks a static pod's mirror, which the kubelet owns.
const mirrorAnnotation = "kubernetes.io/config.mirror"

// CordonAnnotation marks a Node that nico cordoned: a later rollout that
// finds it cordoned takes the cordon over and lifts it once the Node is
// Ready after its switch, where a cordon of the operator's is left.
const CordonAnnotation = "nico.homystack.io/cordoned"

// Cordon sets Node name's spec.unschedulable to on and marks it with
// CordonAnnotation (removed when on is false), in one merge patch.
func (c *Client) Cordon(ctx context.Context, name string, on bool) error {
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{CordonAnnotation: "true"}},
		"spec": map[string]any{"unschedulable": true}}
	if !on {
		patch = map[string]any{"metadata": map[string]any{"annotations": map[string]any{CordonAnnotation: nil}},
			"spec": map[string]any{"unschedulable": nil}}
	}
	return c.doType(ctx, "PATCH", "/api/v1/nodes/"+url.PathEscape(name), "application/merge-patch+json", patch, nil)
}

// DrainPods lists the pods a drain of node evicts, as kubectl drain
// --ignore-daemonsets does: every pod bound to it but those a DaemonSet
// controls, static pods' mirrors and pods that have finished. Pods being
// deleted are listed, Terminating: the drain is over once they are gone.
func (c *Client) DrainPods(ctx context.Context, node string) ([]Pod, error) {
	var l podList
	if err := c.Get(ctx, "/api/v1/pods?fieldSelector="+url.QueryEscape("spec.nodeName="+node), &l); err != nil {
		return nil, err
	}
	var out []Pod
	for _, it := range l.Items {
		m := it.Metadata
		if _, mirror := m.Annotations[mirrorAnnotation]; mirror || it.Status.Phase == "Succeeded" || it.Status.Phase == "Failed" {
			continue
		}
		daemon := false
		for _, o := range m.OwnerReferences {
			daemon = daemon || (o.Controller && o.Kind == "DaemonSet")
		}
		if daemon {
			continue
		}
		out = append(out, Pod{Namespace: m.Namespace, Name: m.Name, Terminating: m.DeletionTimestamp != nil})
	}
	return out, nil
}

// Evict asks the eviction API to evict p: the API server refuses with
// ErrTooManyRequests while a PodDisruptionBudget forbids it; a pod gone
// already is no error.
func (c *Client) Evict(ctx context.Context, p Pod) error {
	ev := map[string]any{"apiVersion": "policy/v1", "kind": "Eviction",
		"metadata": map[string]any{"name": p.Name, "namespace": p.Namespace}}
	path := "/api/v1/namespaces/" + url.PathEscape(p.Namespace) + "/pods/" + url.PathEscape(p.Name) + "/eviction"
	if err := c.Create(ctx, path, ev); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}
