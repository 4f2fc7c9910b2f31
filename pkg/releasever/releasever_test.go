package releasever

import "testing"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
		t  Triple
	}{
		{"3.6.16", true, Triple{3, 6, 16}},
		{"1.37.0", true, Triple{1, 37, 0}},
		{"0.0.0", true, Triple{}},
		{"3.6", false, Triple{}},
		{"3.6.16.1", false, Triple{}},
		{"3.06.1", false, Triple{}},
		{"3.+6.1", false, Triple{}},
		{"3.-6.1", false, Triple{}},
		{"3..1", false, Triple{}},
		{"v3.6.1", false, Triple{}},
		{"3.6.1-rc.0", false, Triple{}},
		{"3.6. 1", false, Triple{}},
	} {
		got, ok := Parse(tc.in)
		if ok != tc.ok || got != tc.t {
			t.Errorf("Parse(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.t, tc.ok)
		}
	}
}

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		a, b Triple
		want int
	}{
		{Triple{3, 6, 16}, Triple{3, 6, 16}, 0},
		{Triple{3, 6, 16}, Triple{3, 7, 0}, -1},
		{Triple{3, 7, 0}, Triple{3, 6, 16}, 1},
		{Triple{4, 0, 0}, Triple{3, 99, 99}, 1},
		{Triple{3, 6, 1}, Triple{3, 6, 2}, -1},
	} {
		if got := Compare(tc.a, tc.b); got != tc.want {
			t.Errorf("Compare(%v, %v) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
