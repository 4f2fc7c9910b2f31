package config

import (
	"errors"
	"fmt"
	"net/url"
	"time"
)

// Appliers of NixOS generations.
const (
	ApplierNone  = "none"  // the agent does not manage generations
	ApplierExec  = "exec"  // run generations.command with the generation in NICO_* variables
	ApplierNixOS = "nixos" // build the flake's toplevel and switch to it
)

// Generations is how the agent applies its machine's NixOS generations.
type Generations struct {
	Applier          string        // "generations.applier": ApplierNone, ApplierExec or ApplierNixOS
	Command          []string      // "generations.command": the exec applier's command and arguments
	WorkDir          string        // "generations.workDir": checkouts and state; <dataDir>/generations when empty
	SecretsDir       string        // "generations.secretsDir": secrets as <dir>/<name>/<key> files
	HealthDeadline   time.Duration // "generations.healthDeadline"
	AllowFailedUnits []string      // "generations.allowFailedUnits": unit globs that may be failed
	CheckCommands    []string      // "generations.checkCommands": shell commands that must exit 0
	HTTPChecks       []string      // "generations.httpChecks": URLs that must answer 2xx
	AgentPathFile    string        // "generations.agentPathFile": names the nico-agent the running system installed
	HostFileRoots    []string      // "generations.hostFileRoots": where spec.hostFiles may be written
}

// DefaultHostFileRoots is generations.hostFileRoots' default (the same as
// apply.DefaultHostFileRoots).
var DefaultHostFileRoots = []string{"/etc/kubernetes", "/etc/rancher", "/var/lib/nico", "/var/lib/rancher"}

// generationKeys are the agent's generations.* keys, bound to g.
func generationKeys(g *Generations) []key {
	return []key{
		stringKey("generations.applier", &g.Applier, ApplierNone, "how to apply this machine's NixOS generations: none, exec (run generations.command) or nixos (build and switch)", oneOf(ApplierNone, ApplierExec, ApplierNixOS)),
		listKey("generations.command", &g.Command, nil, "the exec applier's command and arguments; it gets NICO_ACTION (apply or rollback), NICO_GENERATION, NICO_GIT_REPO, NICO_REVISION, NICO_FLAKE_ATTR, ..."),
		stringKey("generations.workDir", &g.WorkDir, "", "where checkouts and the exec applier's state live; empty means <dataDir>/generations", absPath(true)),
		stringKey("generations.secretsDir", &g.SecretsDir, "/run/nico/secrets", "secrets named by credentialsRef and secretRef, as <dir>/<name>/<key> files", absPath(false)),
		durationKey("generations.healthDeadline", &g.HealthDeadline, 2*time.Minute, "how long the health checks may take to pass after an activation before it is rolled back", between(0, time.Hour, false)),
		listKey("generations.allowFailedUnits", &g.AllowFailedUnits, nil, "systemd unit globs that may be failed after an activation"),
		listKey("generations.checkCommands", &g.CheckCommands, nil, "health checks: shell commands that must exit 0 after an activation"),
		listKey("generations.httpChecks", &g.HTTPChecks, nil, "health checks: URLs that must answer 2xx after an activation", each(probeURL)),
		listKey("generations.hostFileRoots", &g.HostFileRoots, DefaultHostFileRoots, "directories a generation's hostFiles (certificates, keys, tokens written outside the Nix store) may lie under; a path outside them is refused", each(absPath(false))),
		stringKey("generations.agentPathFile", &g.AgentPathFile, "/etc/nico/agent-path", "a file naming the nico-agent binary the running system installed (the NixOS module writes it); after applying a generation that changes it the agent exits 4 so that its service manager starts the new one; a missing file or an empty value: never", absPath(true)),
	}
}

// generationRules check the generations.* keys together.
func generationRules(g *Generations) []rule {
	return []rule{{keys: []string{"generations.command", "generations.applier"}, check: func() error {
		if g.Applier == ApplierExec && len(g.Command) == 0 {
			return errors.New("[] is not accepted with generations.applier exec; give the command to run")
		}
		return nil
	}}}
}

// probeURL accepts an http or https URL with a host (and any path).
func probeURL(v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not accepted; use an http or https URL with a host, e.g. http://127.0.0.1:10248/healthz", v)
	}
	return nil
}
