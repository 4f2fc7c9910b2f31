package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"

	"github.com/homystack/nico/coordinator/statuspage"
	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/httpserve"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
)

// startStatusPage serves the read-only status page (statusPage.listen) in
// the background until ctx ends or stop is called; stop waits for it. A
// TLS setting that does not load is returned (exit 2); an address that
// cannot be bound is logged and nothing is served: the candidate must not
// stop over its status page.
func startStatusPage(ctx context.Context, cfg config.Coordinator, st *store.Store, log *slog.Logger) (stop func(), err error) {
	sp := cfg.StatusPage
	var tlsCfg *tls.Config
	if sp.Listen != "" && (sp.CertFile != "" || !httpserve.Loopback(sp.Listen)) {
		if tlsCfg, err = pki.ServerTLS(sp.ClientCAFile, sp.CertFile, sp.KeyFile, true); err != nil {
			return nil, fmt.Errorf("nico-coordinator: statusPage.tls: %w", err)
		}
	}
	plog := log.With("component", "status-page")
	srv := &statuspage.Server{Listen: sp.Listen, TLS: tlsCfg, Hub: &statuspage.Hub{Store: st, Log: plog}, Log: plog}
	return srv.Start(ctx)
}
