package ctl

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/restore"
)

// releaseWait is --hand-back-wait's default: how long nicoctl waits for
// each agent to serve its member again once handed its host back.
const releaseWait = 2 * time.Minute

// handBackHelp is --hand-back-wait's help.
const handBackHelp = "with --agents: how long to wait for each agent to serve its member again once its host is handed back (past it the command fails naming the agent; run it again to hand back the rest)"

// agentJournal is the journal of restore and recover through the agents
// unless --journal names one: one per operator, so that a second operation
// is refused while one is unfinished, and kept where a reboot leaves it.
func agentJournal() (string, error) {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("--journal: no default (%w): name the journal file", err)
		}
		dir = filepath.Join(home, ".local", "state")
	}
	dir = filepath.Join(dir, "nico")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("--journal: %w", err)
	}
	return filepath.Join(dir, "recovery.journal.json"), nil
}

// agentTLS is nicoctl's identity to the agents' recovery API and to etcd:
// --tls.caFile (the fleet CA), --tls.certFile and --tls.keyFile (the root
// certificate of a control-plane host).
func (a *app) agentTLS() (*tls.Config, error) {
	t := a.cfg.TLS
	if t.CAFile == "" || t.CertFile == "" || t.KeyFile == "" {
		return nil, fmt.Errorf("--agents needs --tls.caFile, --tls.certFile and --tls.keyFile (got %q, %q, %q): the fleet CA and the operator's root certificate (a control-plane host's pki.dir: ca.crt, root.crt, root.key)",
			t.CAFile, t.CertFile, t.KeyFile)
	}
	return pki.ClientTLS(t.CAFile, t.CertFile, t.KeyFile)
}

// agentsSetup is what restore and recover through the agents start from.
type agentsSetup struct {
	tls    *tls.Config
	agents map[string]string
	jf     restore.FileJournal
	// wait bounds each agent's serving again once handed back.
	wait time.Duration
}

// setupAgents checks --agents and --journal and finds the control-plane
// agents from the seeds.
func (a *app) setupAgents(ctx context.Context, fleet, journal string, seeds []string, wait time.Duration) (*agentsSetup, error) {
	if wait <= 0 {
		return nil, withCode(ExitUsage, fmt.Errorf("--hand-back-wait %s: want a positive duration (default %s)", wait, releaseWait))
	}
	if fleet != "" {
		return nil, withCode(ExitUsage, fmt.Errorf("--agents %s and --fleet %s: give one (--agents: through each host's agent; --fleet: every data dir on this host)", strings.Join(seeds, ","), fleet))
	}
	addrs, err := restore.ParseAgents("--agents", seeds)
	if err != nil {
		return nil, withCode(ExitUsage, err)
	}
	tlsCfg, err := a.agentTLS()
	if err != nil {
		return nil, withCode(ExitUsage, err)
	}
	if journal == "" {
		if journal, err = agentJournal(); err != nil {
			return nil, withCode(ExitUsage, err)
		}
	}
	agents, err := restore.DiscoverAgents(ctx, addrs, tlsCfg, max(a.cfg.Timeout, time.Second))
	if err != nil {
		return nil, withCode(ExitUsage, fmt.Errorf("--agents %s: %w", strings.Join(addrs, ","), err))
	}
	return &agentsSetup{tls: tlsCfg, agents: agents, jf: restore.FileJournal{Path: journal}, wait: wait}, nil
}

// handBack finishes the journal's operation when it is done but some host
// it held was not handed back to its agent, or was and does not serve its
// member yet (nicoctl ended first, or the hand-back timed out): it hands
// back what is left and does nothing else; done tells that the command
// ends there. A done journal with nothing left ends the command too when
// same (the command names the journal's operation again) and not again:
// it is the command its own error message advised to run again.
func (a *app) handBack(ctx context.Context, s *agentsSetup, same func(*restore.Journal) bool, again bool) (done bool, err error) {
	j, ok, err := s.jf.Load()
	if err != nil {
		return false, withCode(ExitUsage, err)
	}
	if !ok || j.Step != restore.StepDone {
		return false, nil
	}
	af, err := s.fleetOf(j)
	if err != nil {
		return false, nil // a host of it is gone: nothing to hand back there
	}
	defer af.Close()
	var left []string
	for _, h := range af.Survey(ctx, max(a.cfg.Timeout, time.Second)) {
		if h.Held == j.ID || (h.Held == "" && !h.Serving) {
			left = append(left, h.Node)
		}
	}
	if len(left) == 0 {
		if same(j) && !again {
			fmt.Fprintf(a.stdout, "%s is done and every host is served by its agent: nothing left to hand back, nothing done (a new restore of this cluster needs --again)\n", j.ID)
			return true, nil
		}
		return false, nil
	}
	if err := af.Release(ctx, s.wait); err != nil {
		return true, fmt.Errorf("%s is done; handing %v back to their agents: %w (run the same command again: it hands back the rest, and does nothing else)", j.ID, left, err)
	}
	fmt.Fprintf(a.stdout, "%s was done; %v handed back to their agents now, voters %s (nothing else done)\n", j.ID, left, votersOf(ctx, af, j))
	return true, nil
}

// fleetOf is the AgentFleet that runs j on the agents of its nodes.
func (s *agentsSetup) fleetOf(j *restore.Journal) (*restore.AgentFleet, error) {
	nodes := append([]string{j.Target}, j.Others...)
	agents := restore.Only(s.agents, nodes...)
	for _, n := range nodes {
		if _, ok := agents[n]; !ok {
			return nil, fmt.Errorf("%s: no agent of %s found (agents: %s): give its address in --agents", j.ID, n, strings.Join(restore.AgentNames(s.agents), ", "))
		}
	}
	return &restore.AgentFleet{Agents: agents, TLS: s.tls, ClientTLS: s.tls, Op: j.ID, ClusterToken: "nico-" + j.ID}, nil
}

// restoreThroughAgents is restore with --agents.
func (a *app) restoreThroughAgents(ctx context.Context, o restoreOpts) error {
	s, err := a.setupAgents(ctx, o.fleet, o.journal, o.agents, o.handBackWait)
	if err != nil {
		return err
	}
	same := func(j *restore.Journal) bool {
		return j.Kind == restore.KindRestore && o.sameSource(j) && (o.target == "" || j.Target == o.target)
	}
	if done, err := a.handBack(ctx, s, same, o.again); done || err != nil {
		return err
	}
	o.journal = s.jf.Path
	j, resumed, err := a.resumable(s.jf, restore.KindRestore, same)
	if err != nil {
		return err
	}
	if !resumed {
		names := restore.AgentNames(s.agents)
		if o.target == "" {
			o.target = names[0]
		}
		a.addMemberEndpoints(ctx, s)
		var src restoreSource
		if j, src, err = a.prepareRestore(ctx, o, names, a.now()); err != nil {
			return err
		}
		if err := s.jf.Save(j); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "%s: snapshot %s verified (sha256 %s, revision %d, %d keys); restoring onto %s through its agent, then %v rejoin\n",
			j.ID, src.describe(), j.Snapshot.SHA256[:12], j.Snapshot.Revision, j.Snapshot.Keys, j.Target, j.Others)
	}
	if err := a.runThroughAgents(ctx, s, j); err != nil {
		return err
	}
	if j.Snapshot.Name != "" {
		// The fetched copy served its purpose; the store keeps the original.
		_ = os.Remove(j.Snapshot.Path)
	}
	return nil
}

// recoverThroughAgents is recover with --agents: the survivors are what
// the agents report of their hosts.
func (a *app) recoverThroughAgents(ctx context.Context, o recoverOpts, stdin io.Reader) error {
	s, err := a.setupAgents(ctx, o.fleet, o.journal, o.agents, o.handBackWait)
	if err != nil {
		return err
	}
	if done, err := a.handBack(ctx, s, func(*restore.Journal) bool { return false }, false); done || err != nil {
		return err
	}
	j, resumed, err := a.resumable(s.jf, restore.KindRecover, func(*restore.Journal) bool { return true })
	if err != nil {
		return err
	}
	if resumed {
		return a.runThroughAgents(ctx, s, j)
	}
	for _, r := range o.replace {
		if _, ok := s.agents[r]; !ok {
			return withCode(ExitUsage, fmt.Errorf("--replace %q has no agent among those found (agents: %s)", r, strings.Join(restore.AgentNames(s.agents), ", ")))
		}
	}
	if o.voters == 0 {
		o.voters = len(s.agents) - len(o.replace)
	}
	timeout := max(a.cfg.Timeout/2, time.Second)
	hosts := (&restore.AgentFleet{Agents: s.agents, TLS: s.tls}).Survey(ctx, timeout)
	hosts = slices.DeleteFunc(hosts, func(h restore.HostState) bool { return slices.Contains(o.replace, h.Node) })
	j, err = a.proposeRecovery(ctx, o, s.jf, restore.Survivors(hosts), s.tls, timeout, " through its agent", stdin)
	if err != nil {
		return err
	}
	return a.runThroughAgents(ctx, s, j)
}

// runThroughAgents runs j to its end on the agents, printing each step,
// then hands each host back to its agent, one at a time.
func (a *app) runThroughAgents(ctx context.Context, s *agentsSetup, j *restore.Journal) error {
	af, err := s.fleetOf(j)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	defer af.Close()
	if err := a.awaitAgents(ctx, af, j); err != nil {
		return err
	}
	start := a.now()
	r := &restore.Runner{Fleet: af, Journal: s.jf, Prefix: a.cfg.Prefix, Now: a.now, Log: a.logger(), AfterStep: func(restore.Step) error {
		if n := len(j.History); n > 0 {
			fmt.Fprintf(a.stdout, "  %s\n", j.History[n-1])
		}
		return nil
	}}
	if err := r.Run(ctx, j); err != nil {
		if errors.Is(err, restore.ErrStillServing) || errors.Is(err, restore.ErrAgentRefused) {
			return withCode(ExitRefused, err)
		}
		return err
	}
	if err := af.Release(ctx, s.wait); err != nil {
		return fmt.Errorf("%s: done, but handing the hosts back to their agents: %w (run the same command again: it hands back the rest, and does nothing else)", j.ID, err)
	}
	fmt.Fprintf(a.stdout, "%s: done in %s: cluster %x, voters %s%s, each member served by its agent again\n",
		j.ID, a.now().Sub(start).Round(time.Millisecond), j.NewClusterID, votersOf(ctx, af, j), standbysNote(j))
	return nil
}

// abortThroughAgents is restore --abort with --agents: the journal's
// operation, still at its first step, is abandoned; each host it held is
// handed back to its agent with the fence the operation wrote removed.
func (a *app) abortThroughAgents(ctx context.Context, o restoreOpts) error {
	s, err := a.setupAgents(ctx, o.fleet, o.journal, o.agents, o.handBackWait)
	if err != nil {
		return err
	}
	j, ok, err := s.jf.Load()
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if !ok || j.Step == restore.StepDone {
		return withCode(ExitNotFound, fmt.Errorf("no unfinished restore or recovery in %s", s.jf.Path))
	}
	if j.Step != restore.StepStop {
		return withCode(ExitRefused, fmt.Errorf("%s is at step %s, past stopping the old cluster: it cannot be abandoned, run its command again to finish it", j.ID, j.Step))
	}
	af, err := s.fleetOf(j)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if err := af.Abandon(ctx, s.wait); err != nil {
		return err
	}
	if live := a.liveClient(ctx); live != nil {
		defer live.Close()
		if err := restore.ReleaseLive(ctx, live, a.cfg.Prefix, j, "aborted with nicoctl restore --abort"); err != nil {
			return err
		}
	}
	if err := os.Rename(s.jf.Path, s.jf.Path+".aborted"); err != nil {
		return fmt.Errorf("put the journal aside: %w", err)
	}
	fmt.Fprintf(a.stdout, "%s aborted: every host handed back to its agent, its fences removed, the live cluster's slot freed (when it answered); the journal is now %s.aborted\n", j.ID, s.jf.Path)
	return nil
}

// addMemberEndpoints adds to --endpoints the client URLs of the members
// the agents report serving: the live cluster is then asked (its voters,
// its slot, its lineage) even when --endpoints does not reach it.
func (a *app) addMemberEndpoints(ctx context.Context, s *agentsSetup) {
	for _, h := range (&restore.AgentFleet{Agents: s.agents, TLS: s.tls}).Survey(ctx, max(a.cfg.Timeout, time.Second)) {
		if h.Serving && h.ClientURL != "" && !slices.Contains(a.cfg.Endpoints, h.ClientURL) {
			a.cfg.Endpoints = append(a.cfg.Endpoints, h.ClientURL)
		}
	}
}
