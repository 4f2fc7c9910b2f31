package main

import (
	"context"
	"sync"

	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
)

// boundSecrets is the appliers' secret source: the files of
// generations.secretsDir until the agent has connected, then the
// machine's projected secrets (kubepki.NodeSource, opened with the node
// key) with those files as the fallback.
type boundSecrets struct {
	machine string
	keyFile string
	files   apply.Secrets

	mu  sync.Mutex
	src apply.Secrets
}

// dirSecrets is generations.secretsDir's files.
func dirSecrets(cfg config.Agent) apply.Secrets { return apply.DirSecrets(cfg.Generations.SecretsDir) }

func newBoundSecrets(machine string, dir pki.Dir, files apply.Secrets) *boundSecrets {
	return &boundSecrets{machine: machine, keyFile: dir.Key(pki.NodeLeaf), files: files, src: files}
}

// bind is agent.Config.OnConnect.
func (b *boundSecrets) bind(st *store.Store) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.src = kubepki.NodeSource{Store: st, Machine: b.machine, KeyFile: b.keyFile, Fallback: b.files}
}

// Secret implements apply.Secrets.
func (b *boundSecrets) Secret(ctx context.Context, name string) (map[string][]byte, error) {
	b.mu.Lock()
	src := b.src
	b.mu.Unlock()
	return src.Secret(ctx, name)
}
