package config

import (
	"reflect"
	"testing"
	"time"
)

// TestClusterHookKeys: drain.* and kubeconfigPublish.* are set from a
// flag, the environment or the file; a bad value is refused naming the
// key, the value and what is accepted.
func TestClusterHookKeys(t *testing.T) {
	base := []string{"--name=cp-2", "--etcd.endpoints=" + endpoint}
	a, err := loadAgent(t, input{
		args: append(base, "--drain.kubeconfig=/etc/rancher/k3s/k3s.yaml"),
		env:  map[string]string{"NICO_DRAIN_RESYNC": "1m"},
		file: "kubeconfigPublish:\n  interval: 5s\ndrain:\n  outputTail: 4096\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := (Drain{Kubeconfig: "/etc/rancher/k3s/k3s.yaml", Resync: time.Minute, OutputTail: 4096}); a.Drain != want {
		t.Errorf("Drain = %+v, want %+v", a.Drain, want)
	}
	if a.KubeconfigPublish.Interval != 5*time.Second {
		t.Errorf("KubeconfigPublish = %+v, want 5s", a.KubeconfigPublish)
	}
	for _, tc := range []struct{ flag, value, want string }{
		{"drain.kubeconfig", "admin.conf", `"admin.conf" is not accepted; use an absolute path, or leave it empty for the default`},
		{"drain.resync", "500ms", "500ms is not accepted; use a duration from 1s to 1h"},
		{"drain.outputTail", "100", "100 is not accepted; use a number of bytes from 256 to 65536"},
		{"kubeconfigPublish.interval", "2h", "2h is not accepted; use a duration from 1s to 1h"},
	} {
		_, err := loadAgent(t, input{args: append(base, "--"+tc.flag+"="+tc.value)})
		wantErr(t, err, tc.flag+": ", tc.want)
		if keys := keyErrors(err); !reflect.DeepEqual(keys, []string{tc.flag}) {
			t.Errorf("%s=%s: errors on %v, want only %s", tc.flag, tc.value, keys, tc.flag)
		}
	}
	_, err = loadAgent(t, input{args: base, env: map[string]string{"NICO_DRAIN_OUTPUTTAIL": "2k"}})
	wantErr(t, err, "drain.outputTail: ", `"2k" is not accepted; use a whole number`)
}
