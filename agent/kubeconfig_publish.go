package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
)

// KubeconfigPublishConfig says how a control-plane agent publishes the
// kubeconfig its cluster's distribution writes (spec.kubeconfig.path).
type KubeconfigPublishConfig struct {
	// Interval is how often the file is re-read (10s when zero): a
	// changed file is published again.
	Interval time.Duration
	// ReadFile reads the file at the spec's path (os.ReadFile when nil;
	// a test machine reads under its own root).
	ReadFile func(string) ([]byte, error)
	// SecretsKey is the store's secrets key file ("": pki.dir's).
	SecretsKey string
}

// kubeconfigPublisher is the agent's kubeconfig-publish controller. On the
// publisher of a cluster whose spec.kubeconfig.path is set (its first ready
// control-plane machine, api.KubernetesCluster.KubeconfigPublisher), once
// the control plane is ready, it reads that file, rewrites its server to
// https://<status.controlPlaneEndpoint>, and writes it, sealed, as the
// secret <cluster>-kubeconfig (key value) when it differs from what is
// there; it reports the outcome in the cluster's KubeconfigReport (a
// missing or unparseable file names the path), which the leader turns into
// the KubeconfigPublished condition.
//
//	claim + cluster (watch, tick) --> path set, control plane ready, I publish?
//	    --no--> nothing | yes --> read file --> rewrite server --> seal, write if changed
//	    --> report (published | the path and the error)
type kubeconfigPublisher struct {
	name  string // the node's
	now   func() time.Time
	log   *slog.Logger
	store func() *store.Store
	cfg   KubeconfigPublishConfig
	last  *api.KubeconfigReportStatus // the last report written
}

func (a *Agent) kubeconfigPublish() controller.Controller {
	if !a.controlPlane() {
		return nil
	}
	cfg := a.cfg.KubeconfigPublish
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.ReadFile == nil {
		cfg.ReadFile = os.ReadFile
	}
	if cfg.SecretsKey == "" && a.cfg.PKI.Dir != "" {
		cfg.SecretsKey = a.cfg.PKI.Dir.SecretsKey()
	}
	p := &kubeconfigPublisher{name: a.cfg.Name, now: func() time.Time { return a.Now() }, log: a.log, store: a.store, cfg: cfg}
	return &controller.Func{ControllerName: "kubeconfig-publish", Resync: cfg.Interval, Do: p.reconcile,
		Prefixes: []string{store.ClusterClaimKey(a.cfg.Name), store.ClustersDir}}
}

// reconcile publishes once.
func (p *kubeconfigPublisher) reconcile(ctx context.Context) error {
	kc, err := p.cluster(ctx)
	if err != nil || kc == nil {
		return err
	}
	path := kc.Spec.Kubeconfig.Path
	st := api.KubeconfigReportStatus{Machine: p.name, Path: path, Server: "https://" + kc.Status.ControlPlaneEndpoint}
	value, err := p.read(path, st.Server)
	if err == nil {
		st.Digest = digest(value)
		var changed bool
		if changed, err = p.publish(ctx, kc.Metadata.Name, value); err == nil {
			st.Published = true
			st.PublishedAt = p.now().UTC()
			if !changed && p.last != nil && p.last.Published && p.last.Digest == st.Digest {
				st.PublishedAt = p.last.PublishedAt
			}
			if changed {
				p.log.Info("kubeconfig published", "cluster", kc.Metadata.Name, "path", path, "server", st.Server)
			}
		}
	}
	if err != nil {
		st.Message = fmt.Sprintf("%s on %s: %v", path, p.name, err)
		p.log.Warn("kubeconfig not published", "cluster", kc.Metadata.Name, "path", path, "err", err)
	}
	if p.last != nil && reflect.DeepEqual(*p.last, st) {
		return nil
	}
	r := api.NewKubeconfigReport(kc.Metadata.Name)
	r.Status = st
	if err := p.store().PutObject(ctx, r); err != nil {
		return fmt.Errorf("agent: kubeconfig publish: report: %w", err)
	}
	p.last = &st
	return nil
}

// cluster is the cluster whose kubeconfig this machine publishes now, or
// nil: it holds the machine's claim, asks for a distribution's kubeconfig,
// is not being deleted, its control plane is ready and this machine is
// its publisher.
func (p *kubeconfigPublisher) cluster(ctx context.Context) (*api.KubernetesCluster, error) {
	kv, err := p.store().GetKV(ctx, store.ClusterClaimKey(p.name))
	if errors.Is(err, store.ErrNotFound) || (err == nil && kv == nil) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("agent: kubeconfig publish: %w", err)
	}
	kc := &api.KubernetesCluster{}
	if err := p.store().Get(ctx, store.ClusterKey(string(kv.Value)), kc); errors.Is(err, store.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("agent: kubeconfig publish: %w", err)
	}
	ready := api.FindClusterCondition(kc.Status.Conditions, api.CondControlPlaneReady)
	if kc.Deleting() || kc.Spec.Kubeconfig.Path == "" || kc.Status.ControlPlaneEndpoint == "" || ready == nil || ready.Status != api.ConditionTrue ||
		kc.KubeconfigPublisher() != p.name {
		return nil, nil
	}
	return kc, nil
}

// read reads the distribution's kubeconfig and rewrites its server.
func (p *kubeconfigPublisher) read(path, server string) ([]byte, error) {
	data, err := p.cfg.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	out, err := rewriteKubeconfigServer(data, server)
	if err != nil {
		return nil, fmt.Errorf("not a kubeconfig: %w", err)
	}
	return out, nil
}

// publish writes value as cluster's kubeconfig secret unless it holds it
// already; a secret of that name another cluster (or none) owns is not
// taken over.
func (p *kubeconfigPublisher) publish(ctx context.Context, cluster string, value []byte) (bool, error) {
	box, err := secretbox.Load(p.cfg.SecretsKey)
	if err != nil {
		return false, err
	}
	s := secrets.New(p.store(), box)
	name := api.KubeconfigSecretName(cluster)
	sec := api.NewSecret(name)
	err = s.Get(ctx, store.NamedSecretKey(name), sec)
	switch {
	case errors.Is(err, store.ErrNotFound):
		sec = api.NewSecret(name)
		sec.Spec = api.SecretSpec{Cluster: cluster, Type: "cluster.x-k8s.io/secret", Data: map[string][]byte{api.KubeconfigSecretKey: value}}
		if err := s.Create(ctx, sec); err != nil {
			return false, fmt.Errorf("secret %s: %w", name, err)
		}
		return true, nil
	case err != nil:
		return false, fmt.Errorf("secret %s: %w", name, err)
	case sec.Spec.Cluster != cluster:
		return false, fmt.Errorf("secret %s belongs to %q, not %s: not taken over", name, sec.Spec.Cluster, cluster)
	case bytes.Equal(sec.Spec.Data[api.KubeconfigSecretKey], value):
		return false, nil
	}
	sec.Spec.Data = map[string][]byte{api.KubeconfigSecretKey: value}
	if err := s.Update(ctx, sec); err != nil {
		return false, fmt.Errorf("secret %s: %w", name, err)
	}
	return true, nil
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
