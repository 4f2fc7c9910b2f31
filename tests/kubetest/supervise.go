package kubetest

import (
	"sync"
	"time"
)

// RestartDelay is how long a supervised component stays down after it
// exited, as systemd's RestartSec.
const RestartDelay = time.Second

// Supervised is a component restarted whenever it exits, as a systemd unit
// with Restart=always: a controller-manager started before the API server
// it talks to exits, and comes back once it can.
type Supervised struct {
	Name string

	start func() (*Process, error)

	mu       sync.Mutex
	cur      *Process
	restarts int
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	stopErr  error
}

// Supervise starts the component with start and keeps restarting it.
func Supervise(name string, start func() (*Process, error)) (*Supervised, error) {
	p, err := start()
	if err != nil {
		return nil, err
	}
	s := &Supervised{Name: name, start: start, cur: p, stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s, nil
}

func (s *Supervised) run() {
	defer close(s.done)
	for {
		s.mu.Lock()
		p := s.cur
		s.mu.Unlock()
		select {
		case <-s.stop:
			return
		case <-p.Done():
		}
		select {
		case <-s.stop:
			return
		case <-time.After(RestartDelay): // RestartSec, not a wait for a condition
		}
		next, err := s.start()
		if err != nil {
			continue // tried again after the next delay: p is still the exited one
		}
		s.mu.Lock()
		s.cur, s.restarts = next, s.restarts+1
		s.mu.Unlock()
	}
}

// Current is the process running now (or the one that exited last).
func (s *Supervised) Current() *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Restarts counts the restarts so far.
func (s *Supervised) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// Stop ends the supervision and stops the process. It is idempotent.
func (s *Supervised) Stop() error {
	s.stopOnce.Do(func() {
		close(s.stop)
		<-s.done
		s.stopErr = s.Current().Stop()
	})
	return s.stopErr
}
