// Package failpoint names the points in nico where a fault test can make
// the process exit: the coordinator's executor around a join's and a
// removal's side effects, its rollout step start, the agent's join,
// removal and generation switch paths, and the steps of nicoctl's restore.
//
// In the default build Hit is a no-op and nothing reads the environment.
// Built with -tags failpoints (tests/faults does), Hit exits the process
// with ExitCode when its name is listed in the NICO_FAILPOINT environment
// variable (comma separated), as if it had been killed there. An entry
// "name:pause" instead blocks the goroutine that reaches the point, once
// per process, after creating <dir>/<name>.reached, until
// <dir>/<name>.release exists; dir is NICO_FAILPOINT_DIR (without it the
// point exits).
package failpoint

import "path/filepath"

// The named points.
const (
	// CoordAfterMemberAdd is right after etcd accepted a learner's
	// MemberAdd, before the operation journals it.
	CoordAfterMemberAdd = "coordinator-after-member-add"
	// CoordAfterJournalLearner is right after the learner was journaled
	// and its join request told the initial cluster.
	CoordAfterJournalLearner = "coordinator-after-journal-learner"
	// CoordBeforePromote is before the coordinator asks etcd to promote.
	CoordBeforePromote = "coordinator-before-promote"
	// CoordAfterPromote is after etcd promoted the learner, before the
	// journal records it.
	CoordAfterPromote = "coordinator-after-promote"
	// CoordAfterJournalRemoval is right after a removal's operation was
	// journaled (started), before any of its side effects.
	CoordAfterJournalRemoval = "coordinator-after-journal-removal"
	// CoordBeforeMemberRemove is after the journal recorded that the
	// member is being removed, before the coordinator asks etcd to.
	CoordBeforeMemberRemove = "coordinator-before-member-remove"
	// CoordAfterMemberRemove is after etcd removed the member, before the
	// operation is closed.
	CoordAfterMemberRemove = "coordinator-after-member-remove"
	// CoordBeforeRolloutStep is before the transaction that starts a
	// rollout step (writes the nodes' next configurations).
	CoordBeforeRolloutStep = "coordinator-before-rollout-step"
	// CoordAfterRolloutStep is right after that transaction committed.
	CoordAfterRolloutStep = "coordinator-after-rollout-step"
	// AgentBeforeSwitch is in the agent once it marked a generation
	// applying, before it switches to it.
	AgentBeforeSwitch = "agent-before-switch"
	// AgentBeforeLearnerStart is in the agent once it was added as a
	// learner, before it starts its member.
	AgentBeforeLearnerStart = "agent-before-learner-start"
	// AgentRemoved is in the agent once it found itself removed, before it
	// wipes its member's data.
	AgentRemoved = "agent-removed"
	// RestoreAfterStop .. RestoreAfterRejoin are in nicoctl restore and
	// recover (pkg/restore's Runner), right after the journal saved the
	// end of that step: stopping and fencing the members, restoring the
	// target's data dir, starting the target, journaling in the new
	// cluster, and one member's rejoin (the first reached in a run).
	RestoreAfterStop    = "restore-after-stop-and-fence"
	RestoreAfterRestore = "restore-after-restore-target"
	RestoreAfterStart   = "restore-after-start-target"
	RestoreAfterRecord  = "restore-after-journal-in-new-cluster"
	RestoreAfterRejoin  = "restore-after-rejoin"
)

// All lists every named point.
var All = []string{CoordAfterMemberAdd, CoordAfterJournalLearner, CoordBeforePromote, CoordAfterPromote,
	CoordAfterJournalRemoval, CoordBeforeMemberRemove, CoordAfterMemberRemove, CoordBeforeRolloutStep, CoordAfterRolloutStep,
	AgentBeforeLearnerStart, AgentRemoved, AgentBeforeSwitch,
	RestoreAfterStop, RestoreAfterRestore, RestoreAfterStart, RestoreAfterRecord, RestoreAfterRejoin}

// Env names the environment variable listing the armed points.
const Env = "NICO_FAILPOINT"

// EnvDir names the environment variable giving the directory of the
// paused points' reached and release files.
const EnvDir = "NICO_FAILPOINT_DIR"

// ModePause is the mode of an entry that pauses instead of exiting.
const ModePause = "pause"

// ExitCode is the status a process exits with at an armed failpoint.
const ExitCode = 86

// Hit marks the point name; a no-op unless built with -tags failpoints.
var Hit = func(name string) {}

// ReachedFile is the file a paused point creates in dir when reached.
func ReachedFile(dir, name string) string { return filepath.Join(dir, name+".reached") }

// ReleaseFile is the file whose creation in dir releases a paused point.
func ReleaseFile(dir, name string) string { return filepath.Join(dir, name+".release") }
