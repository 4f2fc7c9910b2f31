package kubepki

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/gossipkey"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
)

// ErrNotProjected: the machine's NodeSecrets hold no secret of that name.
var ErrNotProjected = errors.New("kubepki: secret not projected to this machine")

// sealName binds a NodeSecrets seal to its machine and purpose: a value
// sealed as another node's, or as a gossip secret (package gossipkey
// binds those to the bare node name), does not open as this one.
func sealName(machine string) string { return "node-secrets:" + machine }

// Projection is the values of named secrets one machine may read.
type Projection map[string]map[string][]byte

// Select is the projection of files' secretRefs from the named secrets of
// cluster c: exactly the keys named, of c's secrets only. A reference to
// a secret or key that does not exist (yet) is an error naming it.
func Select(ctx context.Context, s *secrets.Store, c string, files []api.HostFile) (Projection, error) {
	p := Projection{}
	cache := map[string]*api.Secret{}
	for i, f := range files {
		if f.SecretRef == nil {
			continue
		}
		name := f.SecretRef.Name
		sec, ok := cache[name]
		if !ok {
			sec = api.NewSecret(name)
			if err := s.Get(ctx, store.NamedSecretKey(name), sec); err != nil {
				return nil, fmt.Errorf("kubepki: hostFiles[%d] (%s): secret %s: %w", i, f.Path, name, err)
			}
			if sec.Spec.Cluster != c {
				return nil, fmt.Errorf("%w: hostFiles[%d] (%s): secret %s is %q's, not %s's", ErrNotOwned, i, f.Path, name, sec.Spec.Cluster, c)
			}
			cache[name] = sec
		}
		v, ok := sec.Spec.Data[f.SecretRef.Key]
		if !ok {
			return nil, fmt.Errorf("kubepki: hostFiles[%d] (%s): secret %s has no key %q", i, f.Path, name, f.SecretRef.Key)
		}
		if p[name] == nil {
			p[name] = map[string][]byte{}
		}
		p[name][f.SecretRef.Key] = v
	}
	return p, nil
}

// Project writes machine's NodeSecrets: p sealed to nodeCert's key (the
// node certificate its Node status publishes). Nothing is written when
// the values and the key are those already sealed; it reports whether it
// wrote. With a fence (the coordinator leader's term) the write commits
// only while it holds (store.ErrNotLeader otherwise) and while the
// NodeSecrets are as read (store.ErrConflict); nil writes unfenced.
func Project(ctx context.Context, st *store.Store, fence *store.Fence, machine string, nodeCert *x509.Certificate, p Projection) (bool, error) {
	pub, ok := nodeCert.PublicKey.(*ecdsa.PublicKey)
	if !ok {
		return false, fmt.Errorf("kubepki: project to %s: node certificate key is %T, want ECDSA P-256", machine, nodeCert.PublicKey)
	}
	plain, err := json.Marshal(p) // maps marshal in key order: stable
	if err != nil {
		return false, fmt.Errorf("kubepki: project to %s: %w", machine, err)
	}
	digest := projectionDigest(nodeCert, plain)
	cur := api.NewNodeSecrets(machine)
	key, _ := store.KeyOf(cur)
	err = st.Get(ctx, key, cur)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return false, fmt.Errorf("kubepki: project to %s: %w", machine, err)
	case cur.Spec.Digest == digest:
		return false, nil
	}
	gen := cur.Spec.Generation + 1
	sealed, err := gossipkey.Seal(pub, sealName(machine), gen, plain)
	if err != nil {
		return false, fmt.Errorf("kubepki: project to %s: %w", machine, err)
	}
	cur.Spec = api.NodeSecretsSpec{Generation: gen, Digest: digest, Sealed: sealed}
	switch {
	case fence != nil:
		err = putFenced(ctx, st, *fence, cur)
	case cur.Metadata.Revision == 0:
		err = st.CreateObject(ctx, cur)
	default:
		err = st.UpdateObject(ctx, cur)
	}
	if err != nil {
		return false, fmt.Errorf("kubepki: project to %s: %w", machine, err)
	}
	return true, nil
}

// projectionDigest identifies a projection and the key it is sealed to.
// Every value projected is a key, a certificate or a 113-bit token, so a
// plain hash of them discloses nothing a reader of the range could use.
func projectionDigest(nodeCert *x509.Certificate, plain []byte) string {
	h := sha256.New()
	h.Write([]byte("nico node secrets v1\x00"))
	h.Write(nodeCert.RawSubjectPublicKeyInfo)
	h.Write([]byte{0})
	h.Write(plain)
	return hex.EncodeToString(h.Sum(nil))
}

// Secrets resolves a named secret (the interface of apply.Secrets).
type Secrets interface {
	Secret(ctx context.Context, name string) (map[string][]byte, error)
}

// NodeSource is the agent's Secrets: it opens its machine's NodeSecrets
// with the node key and answers from them, and asks Fallback (local
// files, apply.DirSecrets) for names not projected. It reads the store on
// every call, so renewed values are used at once.
type NodeSource struct {
	Store    *store.Store
	Machine  string
	KeyFile  string  // the node key (pki.Dir.Key(pki.NodeLeaf))
	Fallback Secrets // nil: a name not projected is ErrNotProjected
}

// Secret implements Secrets.
func (n NodeSource) Secret(ctx context.Context, name string) (map[string][]byte, error) {
	p, err := n.open(ctx)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if v, ok := p[name]; ok {
		return v, nil
	}
	if n.Fallback != nil {
		return n.Fallback.Secret(ctx, name)
	}
	return nil, fmt.Errorf("%w: %s on %s", ErrNotProjected, name, n.Machine)
}

func (n NodeSource) open(ctx context.Context) (Projection, error) {
	ns := api.NewNodeSecrets(n.Machine)
	key, err := store.KeyOf(ns)
	if err != nil {
		return nil, fmt.Errorf("kubepki: %w", err)
	}
	if err := n.Store.Get(ctx, key, ns); err != nil {
		return nil, fmt.Errorf("kubepki: node secrets of %s: %w", n.Machine, err)
	}
	keyPEM, err := os.ReadFile(n.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("kubepki: node key: %w", err)
	}
	signer, err := pki.ParseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("kubepki: node key %s: %w", n.KeyFile, err)
	}
	priv, ok := signer.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("kubepki: node key %s is %T, want ECDSA P-256", n.KeyFile, signer)
	}
	plain, err := gossipkey.Open(priv, sealName(n.Machine), ns.Spec.Generation, ns.Spec.Sealed)
	if err != nil {
		return nil, fmt.Errorf("kubepki: node secrets of %s: %w", n.Machine, err)
	}
	var p Projection
	if err := json.Unmarshal(plain, &p); err != nil {
		return nil, fmt.Errorf("kubepki: node secrets of %s: not a projection", n.Machine)
	}
	return p, nil
}

// putFenced writes obj while fence holds and obj's key is as read.
func putFenced(ctx context.Context, st *store.Store, fence store.Fence, obj api.Object) error {
	resp, err := st.PutUnchanged(ctx, fence, obj)
	if err != nil {
		return err
	}
	obj.GetMetadata().Revision = resp.Header.Revision
	return nil
}
