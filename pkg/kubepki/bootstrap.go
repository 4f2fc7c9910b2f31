package kubepki

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
)

// Keys of the bootstrap token's secret (BootstrapTokenSecret).
const (
	// KeyExpiration is the token's expiry, RFC 3339 (what the API
	// server's bootstrap-token-<id> Secret carries as "expiration").
	KeyExpiration = "expiration"
	// KeyKubeconfig is the bootstrap kubeconfig: the endpoint, the
	// cluster CA and the token, what a kubelet's --bootstrap-kubeconfig
	// reads.
	KeyKubeconfig = "kubeconfig"
)

// BootstrapTokenTTL is how long a bootstrap token is valid. A token is
// replaced once less than a third of it is left (BootstrapTokenDue): the
// old one stays registered in the API server, and valid, until its own
// expiry, so a machine has a third of the TTL to receive the new one.
const BootstrapTokenTTL = 7 * 24 * time.Hour

// BootstrapTokenSecret is cluster c's bootstrap token: keys value (the
// token, <id>.<secret>), expiration and kubeconfig.
func BootstrapTokenSecret(c string) string { return c + "-bootstrap-token" }

// BootstrapGroup is the group cluster c's bootstrap token authenticates
// as (besides system:bootstrappers), the subject of its node-bootstrapping
// bindings.
func BootstrapGroup(c string) string { return "system:bootstrappers:nico:" + c }

// BootstrapToken is a cluster's bootstrap token as its secret holds it.
type BootstrapToken struct {
	ID, Secret string
	Expires    time.Time
}

// String is the token, <id>.<secret>.
func (t BootstrapToken) String() string { return t.ID + "." + t.Secret }

// ParseBootstrapToken reads a bootstrap token's secret data.
func ParseBootstrapToken(data map[string][]byte) (BootstrapToken, error) {
	id, sec, ok := strings.Cut(string(data[KeyValue]), ".")
	if !ok || len(id) != 6 || len(sec) != 16 {
		return BootstrapToken{}, errors.New("kubepki: bootstrap token: value is not <6 characters>.<16 characters>")
	}
	exp, err := time.Parse(time.RFC3339, string(data[KeyExpiration]))
	if err != nil {
		return BootstrapToken{}, fmt.Errorf("kubepki: bootstrap token: expiration %q: want RFC 3339", data[KeyExpiration])
	}
	return BootstrapToken{ID: id, Secret: sec, Expires: exp}, nil
}

// BootstrapTokenDue tells whether t is to be replaced at now: less than a
// third of BootstrapTokenTTL left (or gone).
func BootstrapTokenDue(t BootstrapToken, now time.Time) bool {
	return t.Expires.Sub(now) < BootstrapTokenTTL/3
}

// ensureBootstrapToken makes cluster c's bootstrap token, replaces it
// when due or unreadable, and keeps its kubeconfig current with the
// endpoint and the cluster CA (none while the endpoint is unknown). It
// reports "created" or "rotated" ("" when nothing changed but the
// kubeconfig).
func ensureBootstrapToken(ctx context.Context, s *secrets.Store, c Cluster, have map[string]*api.Secret, now time.Time) (string, error) {
	name := BootstrapTokenSecret(c.Name)
	cur := have[name]
	var tok BootstrapToken
	what := ""
	if cur != nil {
		var err error
		if tok, err = ParseBootstrapToken(cur.Spec.Data); err != nil || BootstrapTokenDue(tok, now) {
			what = "rotated"
		}
	} else {
		what = "created"
	}
	if what != "" {
		v, err := NewToken()
		if err != nil {
			return "", err
		}
		id, sec, _ := strings.Cut(v, ".")
		tok = BootstrapToken{ID: id, Secret: sec, Expires: now.Add(BootstrapTokenTTL).UTC().Truncate(time.Second)}
	}
	data := map[string][]byte{KeyValue: []byte(tok.String()), KeyExpiration: []byte(tok.Expires.Format(time.RFC3339))}
	if ca := have[CASecret(c.Name)]; ca != nil && c.Endpoint != "" {
		kc, err := TokenKubeconfig(c.Name, c.Endpoint, "kubelet-bootstrap", ca.Spec.Data[KeyCert], tok.String())
		if err != nil {
			return "", err
		}
		data[KeyKubeconfig] = kc
	}
	if cur == nil {
		sec := newSecret(c.Name, name, data)
		if err := s.Create(ctx, sec); err != nil {
			if errors.Is(err, store.ErrExists) {
				return "", nil // made concurrently; the next pass judges it
			}
			return "", fmt.Errorf("kubepki: create %s: %w", name, err)
		}
		have[name] = sec
		return what, nil
	}
	if sameData(cur.Spec.Data, data) {
		return "", nil
	}
	cur.Spec.Data = data
	if err := s.Update(ctx, cur); err != nil {
		return "", fmt.Errorf("kubepki: update %s: %w", name, err)
	}
	return what, nil
}

func sameData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}
