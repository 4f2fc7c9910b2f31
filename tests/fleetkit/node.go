package fleetkit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/member"
)

// Node is one agent of the fleet.
type Node struct {
	Name    string
	Cfg     agent.Config
	Agent   *agent.Agent
	Runtime member.Runtime
	// Cancel ends the agent's Run.
	Cancel context.CancelFunc
	// Done receives what Run returned; whoever takes it puts it back, so
	// that Stop and other waiters see it too.
	Done   chan error
	Notify *Notifier
}

// Exited waits up to within for the agent's Run to return and returns
// what it returned; ok is false when it has not.
func (n *Node) Exited(within time.Duration) (err error, ok bool) {
	select {
	case err = <-n.Done:
		n.Done <- err
		return err, true
	case <-time.After(within):
		return nil, false
	}
}

// WaitRemoved waits until the agent returned agent.ErrRemoved; failing
// says what (what did not happen within).
func (n *Node) WaitRemoved(tb testing.TB, within time.Duration, what string) {
	tb.Helper()
	err, ok := n.Exited(within)
	if !ok {
		tb.Fatal(what)
	}
	if !errors.Is(err, agent.ErrRemoved) {
		tb.Fatalf("%s returned %v, want ErrRemoved", n.Name, err)
	}
}

// Stop ends the agent gracefully and returns what Run returned, once its
// member has exited too.
func (n *Node) Stop() error {
	n.Cancel()
	err, ok := n.Exited(30 * time.Second)
	if !ok {
		// Still wait for its member below: the agent may yet stop it.
		err = errors.New("agent did not stop within 30s")
	}
	// The agent gives its member 10 s to stop; etcd's close cannot be cut
	// short and may take longer on a loaded machine. Wait for it, or the
	// fleet's cleanup removes the data dir of a running etcd, which then
	// ends the whole test process (a fatal "failed to purge snap file").
	select {
	case <-n.Runtime.Done():
		return err
	case <-time.After(60 * time.Second):
	}
	// Stop it here, and wait for it however long its close takes: the
	// test has failed, but the process must outlive the member.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = n.Runtime.Stop(ctx)
	<-n.Runtime.Done()
	return errors.New("member did not exit within 60s of its agent")
}

// Notifier records what an agent tells the service manager; OnReady
// checks, at the moment READY is sent, that the agent may send it.
type Notifier struct {
	OnReady func() error

	mu       sync.Mutex
	ready    int
	readyErr error
}

// Ready runs OnReady and counts READY.
func (n *Notifier) Ready() error {
	var err error
	if n.OnReady != nil {
		err = n.OnReady()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ready++
	if err != nil && n.readyErr == nil {
		n.readyErr = err
	}
	return nil
}

// Status ignores a status line.
func (n *Notifier) Status(string) error { return nil }

// Stopping ignores STOPPING.
func (n *Notifier) Stopping() error { return nil }

// ReadyState returns how often READY was sent and the first violation.
func (n *Notifier) ReadyState() (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ready, n.readyErr
}
