package main

import (
	"path/filepath"
	"time"

	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/config"
)

// newApplier builds the generations applier the configuration asks for
// (nil for none) and its host-file writer.
func newApplier(cfg config.Agent, secrets apply.Secrets) (apply.Applier, *apply.HostFiles, error) {
	g := cfg.Generations
	work := g.WorkDir
	if work == "" {
		work = filepath.Join(cfg.DataDir, "generations")
	}
	gate := apply.Gate{Deadline: g.HealthDeadline, Interval: time.Second}
	for _, c := range g.CheckCommands {
		gate.Checks = append(gate.Checks, apply.CommandCheck{Runner: apply.ExecRunner{}, Cmd: apply.Cmd{Name: "sh", Args: []string{"-c", c}}})
	}
	for _, u := range g.HTTPChecks {
		gate.Checks = append(gate.Checks, apply.HTTPCheck{URL: u})
	}
	// spec.hostFiles: written outside the flake, under the allowed roots;
	// the manifest of what was written survives restarts.
	hostFiles := &apply.HostFiles{Roots: g.HostFileRoots, Manifest: filepath.Join(work, "host-files.json"), Secrets: secrets}
	switch g.Applier {
	case config.ApplierExec:
		x, err := apply.NewExec(apply.ExecConfig{Command: g.Command, Gate: gate, StateFile: filepath.Join(work, "exec-state.json"), HostFiles: hostFiles})
		return x, hostFiles, err
	case config.ApplierNixOS:
		return apply.NewNixOS(apply.NixOSConfig{WorkDir: work, Gate: gate, AllowFailedUnits: g.AllowFailedUnits, Secrets: secrets, HostFiles: hostFiles}), hostFiles, nil
	default:
		return nil, nil, nil
	}
}
