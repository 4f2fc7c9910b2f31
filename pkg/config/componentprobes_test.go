package config

import (
	"reflect"
	"testing"
)

// TestComponentProbeURLs: each componentProbes.* key sets its component's
// URL (from a flag, the environment or the file); unset keys leave the
// cluster's; a bad URL is refused naming the key, the value and what is
// accepted.
func TestComponentProbeURLs(t *testing.T) {
	base := []string{"--name=cp-2", "--etcd.endpoints=" + endpoint}
	a, err := loadAgent(t, input{
		args: append(base, "--componentProbes.apiServerURL=https://127.0.0.12:6443/readyz"),
		env:  map[string]string{"NICO_COMPONENTPROBES_SCHEDULERURL": "https://127.0.0.12:10259/healthz"},
		file: "componentProbes:\n  controllerManagerURL: https://127.0.0.12:10257/healthz\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"kube-apiserver":          "https://127.0.0.12:6443/readyz",
		"kube-controller-manager": "https://127.0.0.12:10257/healthz",
		"kube-scheduler":          "https://127.0.0.12:10259/healthz",
	}
	if got := a.ComponentProbes.URLs(); !reflect.DeepEqual(got, want) {
		t.Errorf("URLs = %v, want %v", got, want)
	}
	a, err = loadAgent(t, input{args: base})
	if err != nil || len(a.ComponentProbes.URLs()) != 0 {
		t.Errorf("default: URLs %v, err %v; want none", a.ComponentProbes.URLs(), err)
	}
	for _, tc := range []struct{ flag, value, reason string }{
		{"componentProbes.apiServerURL", "127.0.0.1:6443/readyz", "it does not parse"},
		{"componentProbes.apiServerURL", "ftp://127.0.0.1:6443/readyz", "the scheme is not http or https"},
		{"componentProbes.controllerManagerURL", "https://127.0.0.1/healthz", "it has no port"},
		{"componentProbes.schedulerURL", "https://127.0.0.1:99999/healthz", "the port is not a number"},
		{"componentProbes.schedulerURL", "https://u:p@127.0.0.1:10259/healthz", "it has user information"},
	} {
		_, err := loadAgent(t, input{args: append(base, "--"+tc.flag+"="+tc.value)})
		wantErr(t, err, tc.flag+": ", `"`+tc.value+`" is not accepted: `+tc.reason, "use an http or https URL with a host and a port")
		if keys := keyErrors(err); !reflect.DeepEqual(keys, []string{tc.flag}) {
			t.Errorf("%s=%s: errors on %v, want only %s", tc.flag, tc.value, keys, tc.flag)
		}
	}
}
