// Package releasever holds the MAJOR.MINOR.PATCH arithmetic that etcd's
// and Kubernetes' version packages share: parsing three decimal numbers
// and ordering them. Each of those packages keeps its own Version type, so
// that an etcd version cannot be passed where a Kubernetes one is meant.
package releasever

import (
	"strconv"
	"strings"
)

// Triple is major, minor and patch.
type Triple [3]int

// Parse reads "MAJOR.MINOR.PATCH": three dot-separated decimal numbers
// without sign, leading zero, pre-release or build suffix. ok is false for
// anything else; the caller names what it accepts.
func Parse(s string) (t Triple, ok bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Triple{}, false
	}
	for i, p := range parts {
		if p == "" || (len(p) > 1 && p[0] == '0') || p[0] < '0' || p[0] > '9' {
			return Triple{}, false
		}
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return Triple{}, false
		}
		t[i] = v
	}
	return t, true
}

// Compare returns -1, 0 or 1 as a is older than, equal to or newer than b.
func Compare(a, b Triple) int {
	for i := range a {
		switch {
		case a[i] < b[i]:
			return -1
		case a[i] > b[i]:
			return 1
		}
	}
	return 0
}
