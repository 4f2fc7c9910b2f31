package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/metrics"
	"github.com/homystack/nico/pkg/metrics/metricstest"
	"github.com/homystack/nico/pkg/testwait"
)

// TestMetricsMoveDuringAJoin: the leader's /metrics, scraped as Prometheus
// would, shows a join as it happens: an operation in flight, then one more
// voter, the join counted as succeeded with its duration and its
// join-to-voter time, and the fault tolerance of two voters.
func TestMetricsMoveDuringAJoin(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	reg := metrics.NewRegistry()
	f.StartCoordinator("c-1", func(c *coord) {
		c.C.Metrics = metrics.NewCoordinator(reg)
		reg.MustRegister(metrics.ControllerHealth("coordinator", c.C.Health))
	})
	srv := &metrics.Server{Listen: "127.0.0.1:0", Registry: reg, Log: f.Log}
	stop, err := srv.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	url := "http://" + srv.Addr() + "/metrics"
	scrape := func() metricstest.Families {
		mfs, err := metricstest.Scrape(nil, url)
		if err != nil {
			t.Fatal(err)
		}
		return mfs
	}
	testwait.For(t, 30*time.Second, "c-1 leads with one voter", func() (bool, string) {
		mfs := scrape()
		leader, _ := mfs.Value("nico_coordinator_is_leader")
		voters, _ := mfs.Value("nico_etcd_members", "role", "voter")
		return leader == 1 && voters == 1, fmt.Sprintf("is_leader %v, voters %v", leader, voters)
	})
	if _, ok := scrape().Value("nico_membership_operations_total", "type", "Join"); ok {
		t.Fatal("a join counted before any")
	}

	f.Start(f.AgentConfig("cp-2", false))
	sawInFlight := false
	testwait.For(t, 90*time.Second, "the join closed in the metrics", func() (bool, string) {
		mfs := scrape()
		if v, _ := mfs.Value("nico_membership_operations_in_flight"); v == 1 {
			sawInFlight = true
		}
		joins, _ := mfs.Value("nico_membership_operations_total", "type", "Join", "outcome", "succeeded")
		voters, _ := mfs.Value("nico_etcd_members", "role", "voter")
		// The in-flight gauge follows the pass after the one that closed
		// the join (it is set from what a pass observes): wait for it too.
		inFlight, _ := mfs.Value("nico_membership_operations_in_flight")
		return joins == 1 && voters == 2 && inFlight == 0, fmt.Sprintf("joins succeeded %v, voters %v, in flight %v", joins, voters, inFlight)
	})
	if !sawInFlight {
		t.Error("never saw nico_membership_operations_in_flight 1 during the join")
	}
	mfs := scrape()
	for _, want := range []struct {
		name   string
		labels []string
		v      float64
	}{
		{"nico_membership_join_to_voter_seconds", nil, 1}, // a histogram: its count
		{"nico_membership_operation_duration_seconds", []string{"type", "Join", "outcome", "succeeded"}, 1},
		{"nico_membership_operations_in_flight", nil, 0},
		{"nico_etcd_members", []string{"role", "learner"}, 0},
		{"nico_etcd_quorum_fault_tolerance", nil, 0}, // two voters: quorum two
		{"nico_etcd_member_is_voter", []string{"node", "cp-2"}, 1},
		{"nico_coordinator_leader_changes_total", nil, 1},
	} {
		if got, ok := mfs.Value(want.name, want.labels...); !ok || got != want.v {
			t.Errorf("%s%v = %v (present %v), want %v", want.name, want.labels, got, ok, want.v)
		}
	}
	if ok, _ := mfs.Value("nico_controller_last_success_timestamp_seconds", "controller", "membership"); ok <= 0 {
		t.Error("membership controller reports no success")
	}
}
