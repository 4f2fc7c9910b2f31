package main

import (
	"log/slog"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/config"
	"github.com/spf13/pflag"
)

// newReloader watches the configuration file the agent was started with
// and the nico-agent the system installs (agent/reload.go); a changed
// configuration counts only once it loads as the running one did, from
// the same flags and environment.
func newReloader(fs *pflag.FlagSet, cfg config.Agent, log *slog.Logger) *agent.Reloader {
	return agent.NewReloader(agent.ReloadWatch{
		ConfigFile:    config.File(fs),
		Valid:         func() error { _, err := config.LoadAgent(fs); return err },
		AgentPathFile: cfg.Generations.AgentPathFile,
	}, log)
}
