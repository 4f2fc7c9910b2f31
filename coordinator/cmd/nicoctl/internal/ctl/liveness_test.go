package ctl

import (
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

func TestLivenessCells(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	if s, a := livenessCells(now, api.NodeLiveness{}); s != "-" || a != "-" {
		t.Fatalf("unknown: %q %q", s, a)
	}
	if s, a := livenessCells(now, api.NodeLiveness{State: "dead", Since: now.Add(-5 * time.Second)}); s != "dead" || a != "5s" {
		t.Fatalf("dead: %q %q", s, a)
	}
}
