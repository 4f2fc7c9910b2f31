package ctl

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/restore"
)

// agentsWait bounds how long a restore or recovery waits, before it stops
// anything, for the agents it acts on to answer.
const agentsWait = time.Minute

// votersOf names the voters of j's new cluster as its member list has them,
// the journal's own list when the cluster does not answer.
func votersOf(ctx context.Context, f restore.Fleet, j *restore.Journal) string {
	names := append([]string{j.Target}, j.Others...)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if cli, err := f.Client(cctx); err == nil {
		defer cli.Close()
		if resp, err := cli.MemberList(cctx); err == nil {
			names = names[:0]
			for _, m := range resp.Members {
				if !m.IsLearner {
					names = append(names, m.Name)
				}
			}
		}
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// standbysNote says which hosts the restore left as standbys.
func standbysNote(j *restore.Journal) string {
	if len(j.Standbys) == 0 {
		return ""
	}
	return "; standbys " + strings.Join(j.Standbys, ", ") + " left as they were"
}

// awaitAgents waits, before j stops anything, until every agent of its
// nodes answers its survey and no other operation holds its host; it says
// which it waits for, and refuses after agentsWait.
func (a *app) awaitAgents(ctx context.Context, af *restore.AgentFleet, j *restore.Journal) error {
	if j.Step != restore.StepStop {
		return nil
	}
	deadline := a.now().Add(agentsWait)
	last := ""
	for {
		var waiting []string
		for _, h := range af.Survey(ctx, max(a.cfg.Timeout, time.Second)) {
			switch {
			case strings.HasPrefix(h.Err, "agent: ") || strings.Contains(h.Err, "the agent at"):
				waiting = append(waiting, h.Node+" (its agent does not answer: "+strings.TrimPrefix(h.Err, "agent: ")+")")
			case h.Held != "" && h.Held != j.ID:
				waiting = append(waiting, h.Node+" (held by "+h.Held+")")
			}
		}
		if len(waiting) == 0 {
			return nil
		}
		now := strings.Join(waiting, "; ")
		if !a.now().Before(deadline) {
			return withCode(ExitRefused, fmt.Errorf("%s: nothing stopped: after %s %s; run the same command again once they answer, or restore --abort", j.ID, agentsWait, now))
		}
		if now != last {
			fmt.Fprintf(a.stdout, "%s: waiting before stopping anything for %s\n", j.ID, now)
			last = now
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
