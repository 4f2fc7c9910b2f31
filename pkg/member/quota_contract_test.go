package member_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/etcdtest"
)

// testQuota: a member started with Config.QuotaBackendBytes reports that
// quota in its Status, and raises NOSPACE once its database passes it.
func testQuota(t *testing.T, rs runtimes) {
	const quota = 4 << 20
	ctx := caseContext(t)
	rt := rs.new()
	stopAll(t, rt)
	cfg := rs.config(t, "quota")
	cfg.QuotaBackendBytes = quota
	if err := rt.Start(ctx, cfg); err != nil {
		t.Fatalf("Start: %v", err)
	}
	cli := etcdtest.NewClient(t, cfg.ClientURL)
	st, err := cli.Status(ctx, cfg.ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	if st.DbSizeQuota != quota {
		t.Fatalf("Status.DbSizeQuota = %d, want %d", st.DbSizeQuota, quota)
	}
	val := strings.Repeat("q", 64<<10)
	for i := range 400 {
		_, err := cli.Put(ctx, fmt.Sprintf("/fill/%04d", i), val)
		if etcdadmin.NoSpace(err) {
			alarms, aerr := cli.AlarmList(ctx)
			if aerr != nil || len(alarms.Alarms) != 1 || alarms.Alarms[0].Alarm.String() != "NOSPACE" {
				t.Fatalf("alarms after NOSPACE: %v, %v", alarms, aerr)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("400 writes of 64 KiB never passed a %d-byte quota", quota)
}
