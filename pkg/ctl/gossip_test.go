package ctl

import (
	"testing"

	"github.com/homystack/nico/pkg/etcdtest"
)

func TestGossipRotateKey(t *testing.T) {
	c := etcdtest.Start(t, 1)
	eps := c.Endpoints()
	run(t, eps, "gossip", "key").want(t, 0, []string{"generation 0"}, nil)
	run(t, eps, "gossip", "rotate-key").want(t, 0, []string{"gossip key generation 1"}, nil)
	run(t, eps, "gossip", "rotate-key").want(t, 0, []string{"gossip key generation 2"}, nil)
	run(t, eps, "gossip", "key").want(t, 0, []string{"generation 2"}, nil)
	run(t, eps, "gossip").want(t, 2, nil, []string{"rotate-key or key"})
}
