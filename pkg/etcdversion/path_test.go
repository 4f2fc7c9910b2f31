package etcdversion

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckPaths(t *testing.T) {
	cases := []struct {
		from, to string
		kind     Kind   // allowed paths
		refused  error  // refused paths: the sentinel
		says     string // refused paths: a piece of the message
	}{
		{from: "3.6.16", to: "3.6.16", kind: KindNone},
		{from: "3.6.10", to: "3.6.16", kind: KindPatch},
		{from: "3.6.0", to: "3.6.16", kind: KindPatch},
		{from: "3.6.16", to: "3.6.10", kind: KindPatch},
		{from: "3.4.0", to: "3.4.45", kind: KindPatch},
		{from: "3.6.16", to: "3.7.3", kind: KindUpgrade},
		{from: "3.6.16", to: "3.7.0", kind: KindUpgrade},
		{from: "3.5.35", to: "3.6.16", kind: KindUpgrade},
		{from: "3.4.45", to: "3.5.0", kind: KindUpgrade},
		{from: "3.7.3", to: "3.6.16", kind: KindDowngrade},
		{from: "3.7.0", to: "3.6.16", kind: KindDowngrade},
		{from: "3.6.16", to: "3.5.35", kind: KindDowngrade},

		{from: "3.6.10", to: "3.7.3", refused: ErrRefusedPath, says: "upgrade to 3.6.16 first, then 3.7.3"},
		{from: "3.5.35", to: "3.7.3", refused: ErrRefusedPath, says: "upgrade to 3.6.16 first, then 3.7.x"},
		{from: "3.5.1", to: "3.7.3", refused: ErrRefusedPath, says: "upgrade to 3.5.35 first, then 3.6.16, then 3.7.x"},
		{from: "3.4.45", to: "3.7.3", refused: ErrRefusedPath, says: "3 minors up"},
		{from: "3.7.3", to: "3.6.10", refused: ErrRefusedPath, says: "downgrade to 3.6.16"},
		{from: "3.7.3", to: "3.5.35", refused: ErrRefusedPath, says: "downgrade to 3.6.16 first"},
		{from: "3.5.35", to: "3.4.45", refused: ErrRefusedPath, says: "downgrade API downgrades from 3.6 on"},
		{from: "3.6.16", to: "3.8.0", refused: ErrUnknownVersion, says: "desired version"},
		{from: "3.6.16", to: "3.6.99", refused: ErrUnknownVersion, says: "3.6.99 is newer than 3.6.16"},
		{from: "3.3.27", to: "3.4.45", refused: ErrUnknownVersion, says: "current version"},
		{from: "2.3.8", to: "3.4.0", refused: ErrUnknownVersion, says: "nico knows 3.4.0-3.4.45"},
		{from: "3.6.16", to: "v3.7.3", refused: ErrMalformed, says: "MAJOR.MINOR.PATCH"},
		{from: "3.6.16", to: "3.7.0-rc.0", refused: ErrMalformed},
		{from: "3.6", to: "3.6.16", refused: ErrMalformed, says: "current version"},
		{from: "3.6.16", to: "3.07.3", refused: ErrMalformed},
		{from: "3.6.16", to: "", refused: ErrMalformed},
	}
	for _, c := range cases {
		step, err := CheckStrings(c.from, c.to)
		name := c.from + "->" + c.to
		if c.refused == nil {
			if err != nil {
				t.Errorf("%s: refused: %v; want %s", name, err, c.kind)
				continue
			}
			if step.Kind != c.kind || step.From.String() != c.from || step.To.String() != c.to {
				t.Errorf("%s: got %v, want %s", name, step, c.kind)
			}
			continue
		}
		if !errors.Is(err, c.refused) {
			t.Errorf("%s: got %v (%v), want %v", name, step, err, c.refused)
			continue
		}
		if !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %q does not say %q", name, err, c.says)
		}
	}
}

func TestPathErrorNamesBothVersions(t *testing.T) {
	_, err := CheckStrings("3.5.35", "3.7.3")
	var pe *PathError
	if !errors.As(err, &pe) {
		t.Fatalf("got %v, want a *PathError", err)
	}
	if pe.From.String() != "3.5.35" || pe.To.String() != "3.7.3" || pe.Next == "" {
		t.Fatalf("got %+v", pe)
	}
	if !strings.Contains(err.Error(), "3.5.35 -> 3.7.3") {
		t.Fatalf("%q does not name the versions", err)
	}
}

func TestKnownTable(t *testing.T) {
	k := Known()
	for i := 1; i < len(k); i++ {
		if k[i-1].Compare(k[i]) >= 0 || k[i].Minor != k[i-1].Minor+1 {
			t.Fatalf("table not one row per consecutive minor, oldest first: %v", k)
		}
	}
	// The versions the tests build (tests/etcdbin) are known.
	for _, v := range []string{"3.6.16", "3.7.3"} {
		if !IsKnown(MustParse(v)) {
			t.Errorf("%s unknown", v)
		}
	}
	k[0] = Version{}
	if Known()[0] == (Version{}) {
		t.Fatal("Known returned the table itself")
	}
}

func TestCompare(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"3.6.16", "3.6.16", 0}, {"3.6.9", "3.6.16", -1}, {"3.7.0", "3.6.16", 1}, {"4.0.0", "3.9.9", 1}} {
		if got := MustParse(c.a).Compare(MustParse(c.b)); got != c.want {
			t.Errorf("%s vs %s: %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
