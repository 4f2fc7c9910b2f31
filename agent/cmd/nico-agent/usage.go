package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"
)

// agentHelp is the head of `nico-agent --help`: what the agent is, its
// subcommands and its exit codes (keep them in step with run and leave).
const agentHelp = `nico-agent runs nico on one machine: it joins the machine to the fleet
(or bootstraps the first etcd member), runs this machine's etcd member as
the coordinator decides (learner, voter, standby), keeps the node's
heartbeat and gossip up, applies the NixOS generations rollouts ask for,
and serves its metrics and, on control-plane nodes, the join endpoint.

Usage:
  nico-agent [flags]          run the agent
  nico-agent leave [flags]    ask the coordinator to remove this node's member
                              safely and wait for the answer (--force, --wait)
  nico-agent switch-check [flags] <toplevel> <action>
                              the pre-switch check of a control-plane host: wait
                              for the switch slot (--wait, --hold; override:
                              NICO_SWITCH_GUARD=off or --force)
  nico-agent apply-objects [flags]
                              apply the flake's objects (objects.file); the
                              nico-objects unit runs it
  nico-agent version          print the version (also --version)

Exit codes (nico-agent):
  0  stopped by a signal
  1  failed
  2  bad configuration or usage
  3  this node was removed from the cluster (systemd: RestartPreventExitStatus=3)
  4  start the agent again: a generation installed another nico-agent, its
     configuration file or binary changed, or its member was removed to
     make it a standby (systemd: RestartForceExitStatus=4)
Exit codes (nico-agent switch-check):
  0  switch: granted, overridden, or nothing to guard
  1  failed, or still waiting at --wait: do not switch
  2  bad configuration or usage
  3  refused: the leader's reason, etcd's minor version changes, or no
     coordinator answered and this host runs an etcd member
Exit codes (nico-agent leave):
  0  the node left the cluster
  1  failed (or the wait ran out)
  2  bad configuration or usage
  3  the coordinator refused the removal (see --force)
Exit codes (nico-agent apply-objects):
  0  applied, or not needed (a newer manifest was applied, no objects.file)
  1  etcd could not be reached or written
  2  refused, nothing written (the field, the value and what is accepted),
     or bad configuration or usage

Flags:
`

// setUsage makes fs's --help print the agent's description before its flags.
func setUsage(fs *pflag.FlagSet, w io.Writer) {
	fs.Usage = func() {
		fmt.Fprint(w, agentHelp)
		fs.PrintDefaults()
	}
}

// versionOut is where the version is printed: standard output, for
// $(nico-agent --version).
var versionOut io.Writer = os.Stdout

// wantsVersion reports whether args ask for the version only.
func wantsVersion(args []string) bool {
	return len(args) > 0 && (args[0] == "version" || args[0] == "--version")
}
