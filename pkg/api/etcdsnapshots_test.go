package api

import (
	"strings"
	"testing"
	"time"
)

func TestEtcdSnapshotsSpecValidate(t *testing.T) {
	cases := []struct {
		name string
		s    EtcdSnapshotsSpec
		// want are the pieces the refusal must say; nil: valid.
		want []string
	}{
		{"none", EtcdSnapshotsSpec{}, nil},
		{"dir", EtcdSnapshotsSpec{Destination: "/mnt/share/etcd", Interval: Duration(time.Hour), Keep: 24, MaxAge: Duration(168 * time.Hour)}, nil},
		{"file URL", EtcdSnapshotsSpec{Destination: "file:///mnt/share/etcd"}, nil},
		{"s3", EtcdSnapshotsSpec{Destination: "s3://127.0.0.1:8333/backups/etcd?tls=false", BeforeChange: SnapshotBestEffort}, nil},
		{"off without destination", EtcdSnapshotsSpec{BeforeChange: SnapshotOff}, nil},
		{"interval without destination", EtcdSnapshotsSpec{Interval: Duration(time.Hour)},
			[]string{`spec.snapshots.destination: "" is not accepted`, "nowhere to go", "s3://HOST[:PORT]/BUCKET"}},
		{"relative dir", EtcdSnapshotsSpec{Destination: "backups"}, []string{`spec.snapshots.destination: "backups"`, "not an absolute path"}},
		{"keys in URL", EtcdSnapshotsSpec{Destination: "s3://ak:sk@host/b"}, []string{"spec.snapshots.destination", "AWS_ACCESS_KEY_ID"}},
		{"no bucket", EtcdSnapshotsSpec{Destination: "s3://host:9000/"}, []string{"no bucket"}},
		{"unknown scheme", EtcdSnapshotsSpec{Destination: "gs://b/p"}, []string{"unknown scheme"}},
		{"bad query", EtcdSnapshotsSpec{Destination: "s3://h/b?region=x"}, []string{"unknown parameter region"}},
		{"short interval", EtcdSnapshotsSpec{Destination: "/d", Interval: Duration(time.Second)}, []string{"spec.snapshots.interval: 1s is not accepted", "at least 1m0s"}},
		{"negative keep", EtcdSnapshotsSpec{Destination: "/d", Keep: -1}, []string{"spec.snapshots.keep: -1", "no limit"}},
		{"short max age", EtcdSnapshotsSpec{Destination: "/d", MaxAge: Duration(time.Second)}, []string{"spec.snapshots.maxAge: 1s"}},
		{"bad beforeChange", EtcdSnapshotsSpec{Destination: "/d", BeforeChange: "always"}, []string{`spec.snapshots.beforeChange: "always"`, `"Required"`, `"BestEffort"`, `"Off"`}},
		{"short timeout", EtcdSnapshotsSpec{Destination: "/d", Timeout: Duration(time.Second)}, []string{"spec.snapshots.timeout: 1s", "at least 10s"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := EtcdClusterSpec{Voters: 3, Snapshots: c.s}
			err := spec.Validate()
			if c.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted %+v", c.s)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestBeforeChangePolicyDefaults(t *testing.T) {
	if p := (EtcdSnapshotsSpec{}).BeforeChangePolicy(); p != SnapshotOff {
		t.Fatalf("no destination: %q, want Off", p)
	}
	if p := (EtcdSnapshotsSpec{Destination: "/d"}).BeforeChangePolicy(); p != SnapshotRequired {
		t.Fatalf("destination, no beforeChange: %q, want Required", p)
	}
}
