package joinendpoint

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/pki"
)

// serving is one serve of the endpoint, with the CA files it started with.
type serving struct {
	sum    string // caSum at its start
	cancel context.CancelFunc
	up     chan struct{} // closed once it listens
	upOnce sync.Once
	done   chan struct{}
	err    error // serve's, once done is closed
}

// stop ends the serve and waits for it.
func (s *serving) stop() {
	s.cancel()
	<-s.done
}

// listening reports whether the serve listens.
func (s *serving) listening() bool {
	select {
	case <-s.up:
		return true
	default:
		return false
	}
}

// server is the controller that keeps the endpoint serving; tick-only,
// every Poll, since its inputs are files:
//
//	keys missing ──▶ wait (logged once)
//	not serving ──▶ serve with the CA files as they are
//	serving, ca.crt or ca.key changed (a CA rotation) ──▶ serve again with them
//	serve ended on an error ──▶ serve again; until the new serve listens,
//	                            each reconcile fails with that error (logged,
//	                            retried with backoff, counted against the
//	                            runtime's health)
//
// Joining machines so get certificates of the CA that signs now and the
// bundle trusted now, from a server certificate of that CA. cur holds the
// current serve for Run, which waits for it.
func (j *Endpoint) server(cur **serving) controller.Controller {
	d := j.cfg.Dir
	need := []string{d.CACert(), d.CAKey(), d.SecretsKey(), d.Cert(pki.CoordinatorLeaf), d.Key(pki.CoordinatorLeaf)}
	logged := false
	var failed error // the last serve's error, until a serve listens
	return &controller.Func{ControllerName: "join-endpoint", Resync: j.cfg.Poll, Do: func(ctx context.Context) error {
		if s := *cur; s != nil {
			select {
			case <-s.done:
				*cur = nil
				if s.err != nil {
					failed = fmt.Errorf("join endpoint stopped: %w", s.err)
				}
			default:
				if sum := j.caSum(); sum != "" && sum != s.sum {
					j.log.Info("the CA files changed; serving again with them", "caCert", d.CACert(), "caKey", d.CAKey())
					s.stop()
					*cur = nil
					break
				}
				if s.listening() {
					failed = nil
				}
				return failed
			}
		}
		for _, p := range need {
			if _, err := os.Stat(p); err != nil {
				if !logged {
					j.log.Debug("join endpoint waits for its keys", "missing", p)
					logged = true
				}
				return nil
			}
		}
		// The serve lasts as long as the controller's run (ctx), past
		// this reconcile.
		sctx, cancel := context.WithCancel(ctx)
		s := &serving{sum: j.caSum(), cancel: cancel, up: make(chan struct{}), done: make(chan struct{})}
		go func() {
			defer close(s.done)
			s.err = j.serve(sctx, func() { s.upOnce.Do(func() { close(s.up) }) })
		}()
		*cur = s
		return failed
	}}
}
