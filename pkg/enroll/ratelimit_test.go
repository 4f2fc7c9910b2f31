package enroll

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	l := newLimiter(RateLimit{Burst: 3, Every: time.Second})
	t0 := time.Unix(1000, 0)
	for i := range 3 {
		if ok, _ := l.allow("a", t0); !ok {
			t.Fatalf("request %d refused within the burst", i)
		}
	}
	ok, wait := l.allow("a", t0)
	if ok || wait != time.Second {
		t.Fatalf("4th: %v, wait %v", ok, wait)
	}
	if ok, _ := l.allow("b", t0); !ok {
		t.Fatal("another source shares the bucket")
	}
	if ok, _ := l.allow("a", t0.Add(500*time.Millisecond)); ok {
		t.Fatal("refilled too early")
	}
	if ok, _ := l.allow("a", t0.Add(time.Second)); !ok {
		t.Fatal("not refilled after Every")
	}
	// A long pause refills only up to the burst.
	t1 := t0.Add(time.Hour)
	for i := range 3 {
		if ok, _ := l.allow("a", t1); !ok {
			t.Fatalf("after a pause, request %d refused", i)
		}
	}
	if ok, _ := l.allow("a", t1); ok {
		t.Fatal("burst exceeded after a pause")
	}
	l.prune(t1.Add(time.Hour))
	if len(l.buckets) != 0 {
		t.Fatalf("full buckets kept: %d", len(l.buckets))
	}
}

func TestNonces(t *testing.T) {
	n := newNonces()
	t0 := time.Unix(1000, 0)
	if !n.first("x", t0) || n.first("x", t0.Add(time.Minute)) {
		t.Fatal("replay not caught")
	}
	if !n.first("y", t0) {
		t.Fatal("a new nonce refused")
	}
	if !n.first("x", t0.Add(3*MaxSkew)) {
		t.Fatal("nonce remembered past twice the skew")
	}
}
