package gossipkey

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/enroll"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// SecretSize is the size of a gossip secret made by RotateSecret.
const SecretSize = 32

// Sentinel errors of the secret's rotation and following.
var (
	// ErrNoSealedSecret means the store holds no secret sealed to this
	// node for the current secret generation (it registered after the
	// rotation, or had no published certificate then).
	ErrNoSealedSecret = errors.New("gossipkey: no gossip secret sealed to this node")
	// ErrStaleSecret means a secret does not match the stored SecretCheck.
	ErrStaleSecret = errors.New("gossipkey: the gossip secret does not match the current one")
	// ErrNoRecipient means no node could be sealed to: rotating would
	// leave every member without the secret.
	ErrNoRecipient = errors.New("gossipkey: no node with a usable published certificate")
)

// Member is the machine whose sealed secret a mesh member opens.
type Member struct {
	Name string  // node name
	Dir  pki.Dir // pki.dir: node.key, and gossip.secret
	// Persist writes a secret opened from the store to Dir's gossip.secret
	// (0600). The agent does; the coordinator's member beside it reads it.
	Persist bool
}

// SecretKeyring is what FollowSecret needs of a mesh member (*gossip.Mesh).
type SecretKeyring interface {
	Keyring
	SecretGeneration() uint64
	SetKey(gen uint64, secret []byte) error
	DropPreviousSecret() error
}

// SecretOverlap is how many follow intervals a member keeps the secret a
// rotation replaced (for members that have not switched yet) before it
// drops it, and with it the last key a holder of the old secret could
// still be heard with.
const SecretOverlap = 5

// Recipient is a node a new secret is sealed to.
type Recipient struct {
	Name string
	Key  *ecdsa.PublicKey
}

// Recipients picks the nodes a new secret can be sealed to: those whose
// published certificate (api.NodeStatus.Certificate) names them
// (CN node:<name>), holds an ECDSA P-256 key, is valid at now and, when
// roots is not nil, chains to it. Each other node is in skipped with why.
func Recipients(nodes []*api.Node, roots *x509.CertPool, now time.Time) (ok []Recipient, skipped map[string]string) {
	skipped = map[string]string{}
	for _, n := range nodes {
		name := n.Metadata.Name
		if n.Status.Phase == api.NodeRemoved {
			continue
		}
		if n.Status.Certificate == "" {
			skipped[name] = "no published node certificate (an agent older than this feature, or not started since)"
			continue
		}
		c, err := pki.ParseCert([]byte(n.Status.Certificate))
		if err != nil {
			skipped[name] = fmt.Sprintf("published certificate: %v", err)
			continue
		}
		if want := pki.NodeIdentity(name); c.Subject.CommonName != want {
			skipped[name] = fmt.Sprintf("published certificate is for %q, want %q", c.Subject.CommonName, want)
			continue
		}
		if now.Before(c.NotBefore) || now.After(c.NotAfter) {
			skipped[name] = fmt.Sprintf("published certificate is valid from %s to %s", c.NotBefore.Format(time.RFC3339), c.NotAfter.Format(time.RFC3339))
			continue
		}
		if roots != nil {
			if _, err := c.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
				skipped[name] = fmt.Sprintf("published certificate does not chain to the cluster CA: %v", err)
				continue
			}
		}
		pub, isEC := c.PublicKey.(*ecdsa.PublicKey)
		if !isEC {
			skipped[name] = fmt.Sprintf("published certificate holds a %T key, want ECDSA P-256", c.PublicKey)
			continue
		}
		if _, err := pub.ECDH(); err != nil || pub.Curve.Params().Name != "P-256" {
			skipped[name] = "published certificate key is not P-256"
			continue
		}
		ok = append(ok, Recipient{Name: name, Key: pub})
	}
	return ok, skipped
}

// RotateSecret makes a new random gossip secret, bound to the next key
// generation, seals it to each recipient under its own secrets dir, and
// moves the stored generation to it: one transaction, conditional on the
// generation read (a concurrent rotation makes it start again). It
// returns the new generation.
func RotateSecret(ctx context.Context, st *store.Store, to []Recipient, by string, now time.Time) (uint64, error) {
	if len(to) == 0 {
		return 0, ErrNoRecipient
	}
	for {
		k, err := Current(ctx, st)
		if err != nil {
			return 0, err
		}
		gen := k.Spec.Generation + 1
		secret := make([]byte, SecretSize)
		if _, err := rand.Read(secret); err != nil {
			return 0, fmt.Errorf("gossipkey: new secret: %w", err)
		}
		var ops []clientv3.Op
		for _, r := range to {
			sealed, err := Seal(r.Key, r.Name, gen, secret)
			if err != nil {
				return 0, err
			}
			s := api.NewGossipSecret(r.Name)
			s.Metadata.CreatedAt = now
			s.Spec = api.GossipSecretSpec{Generation: gen, Sealed: sealed}
			op, err := store.PutObjectOp(s)
			if err != nil {
				return 0, err
			}
			ops = append(ops, op)
		}
		k.Spec = api.GossipKeySpec{Generation: gen, RotatedBy: by, RotatedAt: now, SecretGeneration: gen, SecretCheck: gossip.SecretCheck(secret, gen)}
		op, err := store.PutObjectOp(k)
		if err != nil {
			return 0, err
		}
		// etcd bounds a transaction's operations (--max-txn-ops, 128 by
		// default): past that, the sealed secrets go first; members ignore
		// them until the generation below names their check.
		const maxOps = 100
		for len(ops) > maxOps {
			if _, err := st.Txn(ctx, nil, ops[:maxOps]...); err != nil {
				return 0, fmt.Errorf("gossipkey: writing sealed secrets: %w", err)
			}
			ops = ops[maxOps:]
		}
		unchanged, err := store.UnchangedGuard(k)
		if err != nil {
			return 0, err
		}
		_, err = st.Txn(ctx, []clientv3.Cmp{unchanged.Cmp}, append(ops, op)...)
		switch {
		case err == nil:
			return gen, nil
		case !errors.Is(err, store.ErrConflict):
			return 0, fmt.Errorf("gossipkey: rotate secret: %w", err)
		}
		// rotated concurrently: seal a fresh secret to the newer generation
	}
}

// Secret returns the gossip secret of spec's SecretGeneration for who: the
// one in who's gossip.secret if it matches spec's check (a machine that
// joined after the rotation, or restarted), else the one sealed to it in
// the store, opened with its node.key. It returns no secret for a spec
// whose secret was never replaced.
func Secret(ctx context.Context, st *store.Store, who Member, spec api.GossipKeySpec) ([]byte, error) {
	if spec.SecretGeneration == 0 {
		return nil, nil
	}
	gen := spec.SecretGeneration
	if b, err := os.ReadFile(enroll.GossipSecretFile(who.Dir)); err == nil && len(b) > 0 && gossip.SecretCheck(b, gen) == spec.SecretCheck {
		return b, nil
	}
	s := api.NewGossipSecret(who.Name)
	err := st.Get(ctx, store.NodeGossipSecretKey(who.Name), s)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w (node %s, secret generation %d)", ErrNoSealedSecret, who.Name, gen)
	}
	if err != nil {
		return nil, fmt.Errorf("gossipkey: %w", err)
	}
	if s.Spec.Generation != gen {
		return nil, fmt.Errorf("%w (node %s: sealed for generation %d, the current secret's is %d)", ErrNoSealedSecret, who.Name, s.Spec.Generation, gen)
	}
	keyPEM, err := os.ReadFile(who.Dir.Key(pki.NodeLeaf))
	if err != nil {
		return nil, fmt.Errorf("gossipkey: node key: %w", err)
	}
	signer, err := pki.ParseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("gossipkey: node key %s: %w", who.Dir.Key(pki.NodeLeaf), err)
	}
	priv, isEC := signer.(*ecdsa.PrivateKey)
	if !isEC {
		return nil, fmt.Errorf("%w: %s holds a %T", ErrSealKey, who.Dir.Key(pki.NodeLeaf), signer)
	}
	secret, err := Open(priv, who.Name, gen, s.Spec.Sealed)
	if err != nil {
		return nil, err
	}
	if gossip.SecretCheck(secret, gen) != spec.SecretCheck {
		return nil, fmt.Errorf("%w (node %s, generation %d: the sealed one was replaced by a concurrent rotation)", ErrStaleSecret, who.Name, gen)
	}
	if who.Persist {
		if err := pki.WriteFile(enroll.GossipSecretFile(who.Dir), secret); err != nil {
			return nil, fmt.Errorf("gossipkey: persisting the gossip secret: %w", err)
		}
	}
	return secret, nil
}

// CurrentSecret returns the current gossip secret for who (Secret) and
// the current generation; no secret when it was never replaced.
func CurrentSecret(ctx context.Context, st *store.Store, who Member) ([]byte, uint64, error) {
	k, err := Current(ctx, st)
	if err != nil {
		return nil, 0, err
	}
	secret, err := Secret(ctx, st, who, k.Spec)
	return secret, k.Spec.Generation, err
}

// FollowSecret is Follow for a member that also follows the secret: when
// the stored secret generation is newer than the member's, it gets the
// secret (Secret) and installs it (SetKey) before the generation, and
// drops the replaced secret SecretOverlap intervals later. Each distinct
// failure is logged once; the secret never is.
func FollowSecret(ctx context.Context, st *store.Store, m SecretKeyring, who Member, interval time.Duration, log *slog.Logger) {
	(&Follower{St: st, M: m, Secret: &who, Interval: interval, Log: log}).every(ctx)
}

// followSecret installs spec's secret on m when m holds an older one, and
// tells whether it did.
func followSecret(ctx context.Context, st *store.Store, m SecretKeyring, who Member, spec api.GossipKeySpec) (bool, error) {
	if spec.SecretGeneration == 0 || m.SecretGeneration() >= spec.SecretGeneration {
		return false, nil
	}
	secret, err := Secret(ctx, st, who, spec)
	if err != nil {
		return false, err
	}
	err = m.SetKey(spec.SecretGeneration, secret) // SetKey keeps a copy
	clear(secret)
	return err == nil, err
}
