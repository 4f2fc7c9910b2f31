package kubeapi

import (
	"context"
	"net/url"
	"time"
)

// Node is a Node's readiness as its kubelet last reported it.
type Node struct {
	Name string
	// Ready: the Ready condition is True.
	Ready bool
	// Unschedulable: the Node is cordoned (spec.unschedulable).
	Unschedulable bool
	// NicoCordon: it carries CordonAnnotation (nico cordoned it).
	NicoCordon bool
	// Status is the Ready condition's status ("" when the kubelet has
	// reported none), Reason and Message its reason and message.
	Status, Reason, Message string
	// Heartbeat is the Ready condition's lastHeartbeatTime: when the
	// kubelet last posted its status (the kubelet's clock).
	Heartbeat time.Time
}

type nodeList struct {
	Items []struct {
		Metadata struct {
			Name        string            `json:"name"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			Unschedulable bool `json:"unschedulable"`
		} `json:"spec"`
		Status struct {
			Conditions []struct {
				Type              string    `json:"type"`
				Status            string    `json:"status"`
				Reason            string    `json:"reason"`
				Message           string    `json:"message"`
				LastHeartbeatTime time.Time `json:"lastHeartbeatTime"`
			} `json:"conditions"`
		} `json:"status"`
	} `json:"items"`
}

// Nodes reads every Node's readiness, by name.
func (c *Client) Nodes(ctx context.Context) (map[string]Node, error) {
	var l nodeList
	if err := c.Get(ctx, "/api/v1/nodes", &l); err != nil {
		return nil, err
	}
	out := make(map[string]Node, len(l.Items))
	for _, it := range l.Items {
		n := Node{Name: it.Metadata.Name, Unschedulable: it.Spec.Unschedulable, NicoCordon: it.Metadata.Annotations[CordonAnnotation] != ""}
		for _, cond := range it.Status.Conditions {
			if cond.Type == "Ready" {
				n.Status, n.Reason, n.Message, n.Heartbeat = cond.Status, cond.Reason, cond.Message, cond.LastHeartbeatTime
				n.Ready = cond.Status == "True"
			}
		}
		out[n.Name] = n
	}
	return out, nil
}

type leaseList struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			RenewTime *time.Time `json:"renewTime"`
		} `json:"spec"`
	} `json:"items"`
}

// NodeLeases reads when each kubelet last renewed its Node's Lease (in
// kube-node-lease, named after the Node; the kubelet's clock). The kubelet
// renews it every quarter of its lease duration (10 s by default) while
// it posts the Node's status only when that changes or every few minutes,
// so the Lease is the signal that the kubelet runs.
func (c *Client) NodeLeases(ctx context.Context) (map[string]time.Time, error) {
	var l leaseList
	if err := c.Get(ctx, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", &l); err != nil {
		return nil, err
	}
	out := make(map[string]time.Time, len(l.Items))
	for _, it := range l.Items {
		if it.Spec.RenewTime != nil {
			out[it.Metadata.Name] = *it.Spec.RenewTime
		}
	}
	return out, nil
}

// DeleteNode deletes Node name; one already gone is no error.
func (c *Client) DeleteNode(ctx context.Context, name string) error {
	return c.Delete(ctx, "/api/v1/nodes/"+url.PathEscape(name))
}
