package kubeapi

import (
	"context"
	"net/url"
)

// Node is a Node's readiness as its kubelet last reported it.
type Node struct {
	Name string
	// Ready: the Ready condition is True.
	Ready bool
	// Unschedulable: the Node is cordoned (spec.unschedulable).
	Unschedulable bool
	// Status is the Ready condition's status ("" when the kubelet has
	// reported none), Reason and Message its reason and message.
	Status, Reason, Message string
}

type nodeList struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Unschedulable bool `json:"unschedulable"`
		} `json:"spec"`
		Status struct {
			Conditions []struct {
				Type    string `json:"type"`
				Status  string `json:"status"`
				Reason  string `json:"reason"`
				Message string `json:"message"`
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
		n := Node{Name: it.Metadata.Name, Unschedulable: it.Spec.Unschedulable}
		for _, cond := range it.Status.Conditions {
			if cond.Type == "Ready" {
				n.Status, n.Reason, n.Message = cond.Status, cond.Reason, cond.Message
				n.Ready = cond.Status == "True"
			}
		}
		out[n.Name] = n
	}
	return out, nil
}

// DeleteNode deletes Node name; one already gone is no error.
func (c *Client) DeleteNode(ctx context.Context, name string) error {
	return c.Delete(ctx, "/api/v1/nodes/"+url.PathEscape(name))
}
