package enroll

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimit is the per-source-IP token bucket of the join endpoint.
type RateLimit struct {
	// Burst requests are allowed at once; then one every Every.
	Burst int
	Every time.Duration
}

// DefaultRateLimit: 20 requests at once per source IP, then one a second
// (a join is two requests).
var DefaultRateLimit = RateLimit{Burst: 20, Every: time.Second}

// maxBuckets bounds the limiter's memory; past it, full buckets are
// forgotten (a forgotten bucket is a full one).
const maxBuckets = 4096

// limiter is a token bucket (golang.org/x/time/rate) per key. It reads no
// clock: now is given.
type limiter struct {
	rate    RateLimit
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func newLimiter(r RateLimit) *limiter {
	return &limiter{rate: r, buckets: map[string]*rate.Limiter{}}
}

// allow takes a token from key's bucket; when it is empty it returns false
// and how long until the next token.
func (l *limiter) allow(key string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= maxBuckets {
			l.prune(now)
		}
		b = rate.NewLimiter(rate.Every(l.rate.Every), l.rate.Burst)
		l.buckets[key] = b
	}
	if b.AllowN(now, 1) {
		return true, 0
	}
	wait := time.Duration((1 - b.TokensAt(now)) * float64(l.rate.Every))
	return false, wait
}

// prune forgets every bucket that has refilled.
func (l *limiter) prune(now time.Time) {
	for k, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.rate.Burst) {
			delete(l.buckets, k)
		}
	}
}

// nonces remembers the nonces of accepted requests for twice the allowed
// skew; older requests are refused for their time anyway.
type nonces struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func newNonces() *nonces { return &nonces{seen: map[string]time.Time{}} }

// first records nonce and tells whether it was new.
func (n *nonces) first(nonce string, now time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, at := range n.seen {
		if now.Sub(at) > 2*MaxSkew {
			delete(n.seen, k)
		}
	}
	if _, dup := n.seen[nonce]; dup {
		return false
	}
	n.seen[nonce] = now
	return true
}
