package member

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// readyPoll is how often Exec.Start asks the child whether it serves yet.
const readyPoll = 100 * time.Millisecond

// tailLines is how many of the child's last log lines go into errors.
const tailLines = 8

// Exec runs the member as an etcd binary in a child process. The child is in
// its own process group (a terminal's Ctrl-C does not reach it) and gets
// SIGTERM when the agent dies (Pdeathsig), so it never outlives the agent.
// Pdeathsig is tied to the OS thread that forked the child: never let a
// goroutine that holds runtime.LockOSThread call Start, or the child is
// signalled when that goroutine ends. The child does not inherit
// NOTIFY_SOCKET. Its stdout and stderr go to the Config's logger at debug
// level, one record per line with the field "line".
type Exec struct {
	opts options

	mu      sync.Mutex
	binary  string   // what the next Start runs (UseVersion changes it)
	version string   // binary's etcd version ("" unknown)
	run     *execRun // latest run; nil before the first Start
}

var _ Runtime = (*Exec)(nil)

// execRun is one Start of an Exec, up to the child's exit.
type execRun struct {
	name     string
	stopc    chan struct{} // closed by Stop or a failed Start: SIGTERM
	stopOnce sync.Once
	killc    chan struct{} // closed to SIGKILL at once
	killOnce sync.Once
	// stopAsked is set by Stop, under Exec.mu: a Start that restarts its
	// member does not start another child after it.
	stopAsked bool
	exited    chan struct{} // closed once the child is reaped; waitErr is set
	waitErr   error
	decided   chan struct{} // closed once Start knows whether it succeeded
	done      chan struct{} // closed after err is set
	err       error
	removed   atomic.Bool // the child logged that this member was removed
	pid       atomic.Int64

	mu     sync.Mutex
	failed error    // why Start failed; becomes err
	tail   []string // last tailLines log lines
}

// NewExec returns an idle runtime that runs binary (a path to etcd, or a name
// looked up in PATH at Start); it starts no goroutines.
func NewExec(binary string, opts ...Option) *Exec {
	o := newOptions(opts)
	return &Exec{binary: binary, version: o.binaryVersion, opts: o}
}

// Start runs the etcd child and returns once its client URL answers a
// Maintenance Status call (learners answer it; they refuse linearizable reads).
func (m *Exec) Start(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	r := newExecRun(cfg.Name)
	m.mu.Lock()
	if m.run != nil && !isClosed(m.run.done) {
		m.mu.Unlock()
		return fmt.Errorf("member: start %s: %w", cfg.Name, ErrRunning)
	}
	m.run = r
	binary := m.binary
	m.mu.Unlock()
	restart := restartable(cfg)
	err = r.start(ctx, binary, cfg, m.opts, restart)
	if !restart || !errors.Is(err, errLostPublish) {
		return err
	}
	// The child was killed (SIGKILL: etcd's SIGTERM handler waits out the
	// publish); a fresh child starts from the data dir it left.
	cfg.Logger.Info("etcd member restarts once: "+errLostPublish.Error(), "member", cfg.Name)
	first := r
	r = newExecRun(cfg.Name)
	m.mu.Lock()
	if first.stopAsked {
		m.mu.Unlock()
		return fmt.Errorf("member: start %s: stopped before serving %s", cfg.Name, cfg.ClientURL)
	}
	m.run = r
	m.mu.Unlock()
	return r.start(ctx, binary, cfg, m.opts, false)
}

func newExecRun(name string) *execRun {
	return &execRun{
		name:    name,
		stopc:   make(chan struct{}),
		killc:   make(chan struct{}),
		exited:  make(chan struct{}),
		decided: make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// Stop sends SIGTERM to the child's process group, SIGKILL after the grace
// period or when ctx ends, and returns once the child has exited.
func (m *Exec) Stop(ctx context.Context) error {
	m.mu.Lock()
	r := m.run
	if r != nil {
		r.stopAsked = true
	}
	m.mu.Unlock()
	if r == nil {
		return nil
	}
	r.stopOnce.Do(func() { close(r.stopc) })
	select {
	case <-r.done:
	case <-ctx.Done():
		r.killOnce.Do(func() { close(r.killc) })
		<-r.done
	}
	return nil
}

// Done is closed when the latest run's child has exited.
func (m *Exec) Done() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.run == nil {
		return closedChan
	}
	return m.run.done
}

// Err says why the latest run exited; nil while it runs or after Stop.
func (m *Exec) Err() error {
	m.mu.Lock()
	r := m.run
	m.mu.Unlock()
	if r == nil || !isClosed(r.done) {
		return nil
	}
	return r.err
}

// Pid returns the child's process id (also its process group id), or 0 when
// no child runs.
func (m *Exec) Pid() int {
	m.mu.Lock()
	r := m.run
	m.mu.Unlock()
	if r == nil || isClosed(r.exited) {
		return 0
	}
	return int(r.pid.Load())
}

func (r *execRun) start(ctx context.Context, binary string, cfg Config, opts options, restart bool) error {
	fail := func(err error) error {
		r.err = fmt.Errorf("member: start %s: %w", cfg.Name, err)
		close(r.exited)
		close(r.done)
		return r.err
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if err := checkFree(cfg.PeerURL, cfg.ClientURL); err != nil {
		return fail(err)
	}
	cmd := exec.Command(binary, execArgs(cfg, opts)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.Env = childEnv(os.Environ())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fail(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fail(err)
	}
	if err := cmd.Start(); err != nil {
		return fail(fmt.Errorf("run %s: %w", binary, err))
	}
	r.pid.Store(int64(cmd.Process.Pid))
	var readers sync.WaitGroup
	readers.Add(2)
	go r.forward(&readers, stdout, "stdout", cfg.Logger)
	go r.forward(&readers, stderr, "stderr", cfg.Logger)
	go r.supervise(cmd.Process.Pid, opts.grace)
	go r.wait(cmd, &readers, cfg.Logger)

	if err := r.waitServing(ctx, cfg, restart); err != nil {
		r.mu.Lock()
		r.failed = err
		r.mu.Unlock()
		close(r.decided)
		// SIGKILL alone: etcd's SIGTERM handler waits for a pending publish.
		r.killOnce.Do(func() { close(r.killc) })
		r.stopOnce.Do(func() { close(r.stopc) })
		<-r.done
		return r.err
	}
	close(r.decided)
	return nil
}

// waitServing polls the child's own client URL until it answers, the child
// exits, Stop is called or ctx ends. With restart set, it also asks the
// child's peer URL whether the child lost its own publish (errLostPublish).
func (r *execRun) waitServing(ctx context.Context, cfg Config, restart bool) error {
	tlsCfg, err := cfg.clientTLS()
	if err != nil {
		return err
	}
	// The child's client URL refuses connections until etcd listens: redial
	// every readyPoll, not after gRPC's default backoff of 1 s and more.
	redial := grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: readyPoll, Multiplier: 1, MaxDelay: readyPoll},
		MinConnectTimeout: time.Second,
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cfg.ClientURL}, TLS: tlsCfg, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{redial}})
	if err != nil {
		return fmt.Errorf("client for %s: %w", cfg.ClientURL, err)
	}
	defer cli.Close()
	// pctx also ends when the child exits or Stop is called, to cut a pending
	// Status call short, and with errLostPublish as its cause on a lost
	// publish.
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-r.exited:
		case <-r.stopc:
		case <-pctx.Done():
		}
		cancel(nil)
	}()
	if restart {
		stop, err := watchLostPublish(pctx, cancel, cfg, tlsCfg)
		if err != nil {
			return err
		}
		defer stop()
	}
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		sctx, cancelStatus := context.WithTimeout(pctx, time.Second)
		_, err := cli.Status(sctx, cfg.ClientURL)
		cancelStatus()
		if err == nil {
			return nil
		}
		select {
		case <-pctx.Done():
			if errors.Is(context.Cause(pctx), errLostPublish) {
				return errLostPublish
			}
			return r.notServing(ctx, cfg, err)
		case <-tick.C:
		}
	}
}

// notServing says why waitServing gave up.
func (r *execRun) notServing(ctx context.Context, cfg Config, lastErr error) error {
	select {
	case <-r.exited:
		return fmt.Errorf("etcd exited before serving %s (peer %s): %v; last log:\n%s",
			cfg.ClientURL, cfg.PeerURL, r.waitErr, r.lastLines())
	case <-r.stopc:
		return fmt.Errorf("stopped before serving %s", cfg.ClientURL)
	default:
		return fmt.Errorf("not serving %s yet (last error: %v): %w", cfg.ClientURL, lastErr, ctx.Err())
	}
}

// forward logs each line of one of the child's streams and watches for the
// removal message.
func (r *execRun) forward(wg *sync.WaitGroup, rd io.Reader, stream string, logger *slog.Logger) {
	defer wg.Done()
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if saysRemoved(line) {
			r.removed.Store(true)
		}
		r.mu.Lock()
		r.tail = append(r.tail, line)
		if len(r.tail) > tailLines {
			r.tail = r.tail[len(r.tail)-tailLines:]
		}
		r.mu.Unlock()
		logger.Debug("etcd", "stream", stream, "line", line)
	}
	// A line too long for the scanner ends the scan; keep draining so the
	// child never blocks on a full pipe.
	_, _ = io.Copy(io.Discard, rd)
}

// supervise turns Stop into signals: SIGTERM to the process group, then
// SIGKILL after the grace period or on demand (at once, with no SIGTERM,
// when killc is closed first).
func (r *execRun) supervise(pid int, grace time.Duration) {
	select {
	case <-r.stopc:
	case <-r.exited:
		return
	}
	select {
	case <-r.killc:
	default:
		_ = syscall.Kill(-pid, syscall.SIGTERM)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.killc:
	case <-r.exited:
		return
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// wait reaps the child once its streams are drained and records why it exited.
func (r *execRun) wait(cmd *exec.Cmd, readers *sync.WaitGroup, logger *slog.Logger) {
	readers.Wait()
	r.waitErr = cmd.Wait()
	if r.waitErr == nil {
		r.waitErr = errors.New("exit status 0")
	}
	close(r.exited)
	<-r.decided // Start returns on exited, so this wait is short
	r.mu.Lock()
	failed := r.failed
	r.mu.Unlock()
	switch {
	case failed != nil && r.removed.Load():
		r.err = fmt.Errorf("member: start %s: %w: %w", r.name, ErrRemoved, failed)
	case failed != nil:
		r.err = fmt.Errorf("member: start %s: %w", r.name, failed)
	case r.removed.Load():
		r.err = ErrRemoved
	case isClosed(r.stopc):
		r.err = nil
	default:
		r.err = fmt.Errorf("member %s: etcd exited: %v; last log:\n%s", r.name, r.waitErr, r.lastLines())
	}
	if r.err != nil && failed == nil {
		logger.Warn("etcd member exited", "err", r.err)
	}
	close(r.done)
}

func (r *execRun) lastLines() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.tail, "\n")
}
