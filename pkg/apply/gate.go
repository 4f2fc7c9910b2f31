package apply

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"
)

// Check is one health check of the machine.
type Check interface {
	Name() string
	Check(ctx context.Context) error
}

// Gate decides whether a machine is healthy after an activation: every
// check must pass at once within Deadline, retried every Interval.
type Gate struct {
	Checks   []Check
	Deadline time.Duration // 2 minutes when zero
	Interval time.Duration // 1 second when zero
}

func (g Gate) interval() time.Duration {
	if g.Interval <= 0 {
		return time.Second
	}
	return g.Interval
}

// Wait runs the checks (the gate's and extra) until all pass together, or
// returns ErrHealth naming the checks that failed last.
func (g Gate) Wait(ctx context.Context, extra ...Check) error {
	deadline, interval := g.Deadline, g.Interval
	if deadline <= 0 {
		deadline = 2 * time.Minute
	}
	if interval <= 0 {
		interval = time.Second
	}
	checks := append(append([]Check(nil), g.Checks...), extra...)
	if len(checks) == 0 {
		return nil
	}
	ctx2, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	t := time.NewTicker(interval)
	defer t.Stop()
	// last holds the failures of the last round that ran to its end
	// before the deadline: a round the deadline cuts short fails with the
	// context's error, which says nothing about the machine.
	var last []error
	for {
		var failed []error
		for _, c := range checks {
			if err := c.Check(ctx2); err != nil {
				failed = append(failed, fmt.Errorf("%s: %w", c.Name(), err))
			}
		}
		if len(failed) == 0 {
			return nil
		}
		if ctx2.Err() == nil || last == nil {
			last = failed
		}
		select {
		case <-ctx2.Done():
		case <-t.C:
			if ctx2.Err() == nil {
				continue
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return fmt.Errorf("%w within %s: %w", ErrHealth, deadline, errors.Join(last...))
	}
}

// CheckFunc makes a Check of a function.
type CheckFunc struct {
	Label string
	F     func(context.Context) error
}

// Name implements Check.
func (c CheckFunc) Name() string { return c.Label }

// Check implements Check.
func (c CheckFunc) Check(ctx context.Context) error { return c.F(ctx) }

// CommandCheck passes when its command exits 0.
type CommandCheck struct {
	Runner Runner
	Cmd    Cmd
}

// Name implements Check.
func (c CommandCheck) Name() string { return "command " + c.Cmd.String() }

// Check implements Check.
func (c CommandCheck) Check(ctx context.Context) error {
	_, err := c.Runner.Run(ctx, c.Cmd)
	return err
}

// HTTPCheck passes when GET URL answers 2xx.
type HTTPCheck struct {
	URL    string
	Client *http.Client // http.DefaultClient when nil, bounded by ctx
}

// Name implements Check.
func (c HTTPCheck) Name() string { return "http " + c.URL }

// Check implements Check.
func (c HTTPCheck) Check(ctx context.Context) error {
	cli := c.Client
	if cli == nil {
		cli = http.DefaultClient
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, c.URL, nil)
	if err != nil {
		return err
	}
	resp, err := cli.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

// FailedUnits passes when systemd has no failed unit but those the allow
// list matches (shell globs such as "user@*.service").
type FailedUnits struct {
	Runner Runner
	Allow  []string
}

// Name implements Check.
func (FailedUnits) Name() string { return "failed units" }

// Check implements Check.
func (c FailedUnits) Check(ctx context.Context) error {
	out, err := c.Runner.Run(ctx, Cmd{Name: "systemctl", Args: []string{"list-units", "--state=failed", "--plain", "--no-legend", "--no-pager"}})
	if err != nil {
		return err
	}
	var bad []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if !c.allowed(f[0]) {
			bad = append(bad, f[0])
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("failed: %s", strings.Join(bad, ", "))
	}
	return nil
}

func (c FailedUnits) allowed(unit string) bool {
	for _, p := range c.Allow {
		if ok, _ := path.Match(p, unit); ok {
			return true
		}
	}
	return false
}
