package main

import (
	"log/slog"
	"path/filepath"

	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// clusterHooks gives the Kubernetes cluster controller its secrets when
// the candidate's PKI directory (beside tls.caFile) holds the store's
// secrets key and nico's CA with its key; otherwise clusters get no
// secrets, and it says so. root is the client on the whole keyspace.
func clusterHooks(cfg config.Coordinator, st *store.Store, root *clientv3.Client, log *slog.Logger) coordinator.ClusterHooks {
	hooks := coordinator.ClusterHooks{DefaultGitRepo: cfg.DefaultGitRepo}
	if cfg.TLS.CAFile == "" {
		return hooks
	}
	dir := pki.Dir(filepath.Dir(cfg.TLS.CAFile))
	box, err := secretbox.Load(dir.SecretsKey())
	if err != nil {
		log.Info("Kubernetes clusters get no secrets from this candidate: no secrets key", "err", err)
		return hooks
	}
	ca, err := pki.LoadCA(dir.CACert(), dir.CAKey())
	if err != nil {
		log.Info("Kubernetes clusters get no secrets from this candidate: no CA key", "err", err)
		return hooks
	}
	sec := secrets.New(st, box)
	hooks.Secrets = &coordinator.KubePKISecrets{Secrets: sec, Store: st, Root: root, NicoCA: ca}
	kapi := &coordinator.KubeAPI{Secrets: sec, Store: st}
	hooks.API, hooks.Nodes = kapi, kapi
	return hooks
}
