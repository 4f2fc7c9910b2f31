package kubeversion

import (
	"errors"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/etcdversion"
)

func TestParse(t *testing.T) {
	for _, s := range []string{"1.37.2", "v1.37.2"} {
		if v, err := Parse(s); err != nil || v != (Version{1, 37, 2}) {
			t.Errorf("Parse(%q) = %v, %v", s, v, err)
		}
	}
	for _, s := range []string{"", "1.37", "1.37.2-rc.1", "v1.037.2", "1.x.2", "vv1.37.2", "1.37.+2"} {
		if _, err := Parse(s); !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q) = %v, want ErrMalformed", s, err)
		}
	}
}

func TestCheck(t *testing.T) {
	cases := []struct {
		from, to string
		kind     Kind
		cpFirst  bool
		// refused: pieces the error must say.
		refused []string
	}{
		{"1.37.2", "1.37.2", KindNone, false, nil},
		{"1.37.1", "v1.37.2", KindPatchUp, true, nil},
		{"1.37.2", "1.37.1", KindPatchDown, false, nil},
		{"1.36.4", "1.37.2", KindMinorUp, true, nil},
		{"", "1.37.2", KindNone, false, nil},
		{"1.37.2", "", KindNone, false, nil},
		{"1.35.1", "1.37.2", "", false, []string{"1.35.1 -> 1.37.2 refused", "2 minors up", "upgrade to 1.36.x first", "then toward 1.37.2"}},
		{"1.37.2", "1.36.4", "", false, []string{"1.37.2 -> 1.36.4 refused", "does not support downgrading a minor", "keep 1.37.x"}},
		{"1.37.2", "2.0.0", "", false, []string{"not in nico's table", "1.31, 1.32"}},
		{"1.30.2", "1.31.0", "", false, []string{"1.30 is not in nico's table"}},
		{"1.36.0", "1.38.0", "", false, []string{"Kubernetes 1.38 is not in nico's table"}},
		{"1.36.0", "1.37", "", false, []string{`"1.37"`, "MAJOR.MINOR.PATCH"}},
	}
	for _, c := range cases {
		got, err := CheckStrings(c.from, c.to)
		if c.refused != nil {
			if err == nil {
				t.Errorf("%s -> %s accepted as %v, want refused", c.from, c.to, got)
				continue
			}
			for _, w := range c.refused {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s -> %s: %q lacks %q", c.from, c.to, err, w)
				}
			}
			continue
		}
		if err != nil || got.Kind != c.kind || got.ControlPlaneFirst != c.cpFirst {
			t.Errorf("%s -> %s = %v, %v; want %s control-plane-first=%v", c.from, c.to, got, err, c.kind, c.cpFirst)
		}
	}
	if _, err := CheckStrings("1.35.0", "1.37.0"); !errors.Is(err, ErrRefusedChange) {
		t.Errorf("two minors: %v, want ErrRefusedChange", err)
	}
}

func TestCheckEtcd(t *testing.T) {
	cases := []struct {
		k8s, etcd string
		ok        bool
	}{
		{"1.37.2", "3.6.16", true},
		{"1.37.2", "3.7.3", true},
		{"1.37.2", "3.5.24", true},
		{"1.37.2", "3.5.23", false},
		{"1.37.2", "3.8.0", false},
		{"1.33.4", "3.5.30", true},
		{"1.33.4", "3.6.16", false},
		{"1.38.0", "3.7.3", false},
	}
	for _, c := range cases {
		err := CheckEtcd(MustParse(c.k8s), etcdversion.MustParse(c.etcd))
		if (err == nil) != c.ok {
			t.Errorf("CheckEtcd(%s, %s) = %v, want ok=%v", c.k8s, c.etcd, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrUnsupported) {
			t.Errorf("CheckEtcd(%s, %s) = %v, want ErrUnsupported", c.k8s, c.etcd, err)
		}
	}
	err := CheckEtcd(MustParse("1.33.0"), etcdversion.MustParse("3.6.16"))
	if err == nil || !strings.Contains(err.Error(), "Kubernetes 1.33 supports etcd 3.5.24 to 3.5.x (kubeadm deploys 3.5.24)") {
		t.Errorf("refusal does not say what is supported: %v", err)
	}
}

// TestTableSorted: rows are consecutive minors, oldest first, each
// floor no newer than what kubeadm deploys.
func TestTableSorted(t *testing.T) {
	rows := Table()
	for i, r := range rows {
		if i > 0 && r.Minor.Minor != rows[i-1].Minor.Minor+1 {
			t.Errorf("row %d (%s) does not follow %s", i, r.Minor.MinorString(), rows[i-1].Minor.MinorString())
		}
		if !r.Accepts(r.Kubeadm) || !r.Accepts(r.MinEtcd) {
			t.Errorf("row %s refuses its own versions", r)
		}
	}
}
