package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// withGenerations makes the agents started from now on apply generations
// with the exec applier: a script that appends "<machine> <action>
// <revision>" to a shared log and writes the revision the machine runs;
// the health check fails on machine M for revision "bad-M".
func (c *cluster) withGenerations() {
	c.t.Helper()
	c.gens = filepath.Join(c.dir, "generations")
	if err := os.MkdirAll(c.gens, 0o755); err != nil {
		c.t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\necho \"$NICO_MACHINE $NICO_ACTION ${NICO_REVISION:-none}\" >> %s\necho \"${NICO_REVISION:-none}\" > %s/\"$NICO_MACHINE\".running\n",
		filepath.Join(c.gens, "log"), c.gens)
	if err := os.WriteFile(filepath.Join(c.gens, "apply.sh"), []byte(script), 0o755); err != nil {
		c.t.Fatal(err)
	}
}

// applierArgs are node i's generations flags (none without withGenerations).
func (c *cluster) applierArgs(i int) []string {
	if c.gens == "" {
		return nil
	}
	name := c.nodes[i].name
	return []string{"--generations.applier", "exec", "--generations.command", filepath.Join(c.gens, "apply.sh"),
		"--generations.workDir", filepath.Join(c.dir, name, "gens"), "--generations.healthDeadline", "3s",
		"--generations.agentPathFile", "",
		"--generations.checkCommands", fmt.Sprintf("! grep -qx bad-%s %s", name, filepath.Join(c.gens, name+".running"))}
}

// applied returns the machines that applied revision, in the order of
// the applier's log ("<machine> <action> <revision>" lines).
func (c *cluster) applied(revision string) []string {
	b, _ := os.ReadFile(filepath.Join(c.gens, "log"))
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[1] == "apply" && f[2] == revision {
			out = append(out, f[0])
		}
	}
	return out
}

// startRollout files a rollout of revision over every node.
func (s *scenario) startRollout(name, revision string) {
	s.t.Helper()
	r := api.NewRollout(name)
	r.Metadata.CreatedAt = time.Now()
	r.Spec.Template = api.NixosConfigurationSpec{GitRepo: "https://git.example/fleet", Revision: revision}
	r.Spec.StepTimeout = api.Duration(60 * time.Second)
	// Retried: the client's connection may be to a node just cut off.
	testwait.For(s.t, 30*time.Second, "rollout "+name+" filed", func() (bool, string) {
		ctx, cancel := context.WithTimeout(s.t.Context(), 3*time.Second)
		defer cancel()
		err := s.st.Create(ctx, store.RolloutKey(name), r)
		return err == nil || errors.Is(err, store.ErrExists), fmt.Sprint(err)
	})
}

// waitRollout waits until rollout name reaches a phase in phases and
// returns it.
func (s *scenario) waitRollout(name string, within time.Duration, phases ...api.RolloutPhase) *api.Rollout {
	s.t.Helper()
	r := &api.Rollout{}
	testwait.For(s.t, within, fmt.Sprintf("rollout %s %v", name, phases), func() (bool, string) {
		if err := s.st.Get(s.t.Context(), store.RolloutKey(name), r); err != nil {
			return false, err.Error()
		}
		for _, p := range phases {
			if r.Status.Phase == p {
				return true, ""
			}
		}
		return false, fmt.Sprintf("phase %s, step %d, current %v", r.Status.Phase, r.Status.Step, r.Status.Current)
	})
	return r
}

// notRolledOn is the invariant "a failed generation is not rolled on":
// once machine failed applies revision bad-<failed> (its health check
// fails there), no other machine applies it. It returns the breaches.
func (c *cluster) notRolledOn(failed string) []string {
	var out []string
	seen := false
	for _, m := range c.applied("bad-" + failed) {
		switch {
		case m == failed:
			seen = true
		case seen:
			out = append(out, fmt.Sprintf("bad-%s applied on %s after it failed on %s", failed, m, failed))
		}
	}
	return out
}
