// Package controller is nico's one controller runtime. A controller
// declares its name and the directories ("nodes/") and keys
// ("nixosconfigs/cp-1", not "cp-10"'s) it reads (relative to the store's
// prefix, package store), and implements one level-triggered Reconcile that
// re-reads its inputs; the runtime owns the loop around it.
//
// For each controller the runtime reads the store's current revision,
// reconciles once, and watches every declared entry from that revision on.
// Any number of events, across prefixes, coalesce into one pending
// reconcile; the events' payloads are never handed over. A Settler's
// reconcile after an event waits its settle delay first, so that a burst
// of writes costs one reconcile after it. A closed watch is
// opened again from the last revision it delivered, after a backoff; a watch
// whose revision was compacted away triggers a full resync (a reconcile) and
// is opened again from the current revision. A failed reconcile is retried
// after a backoff, or sooner when an input changes or the resync tick comes.
// A controller that fails outright (its start failed or its Reconcile
// panicked) is restarted after a backoff. Run stops the controllers of a
// group in reverse order when its context ends, or when a reconcile error is
// fatal for the group (WithFatal: a deposed leader's store.ErrNotLeader).
//
// A controller's states, as its Health reports them:
//
//	Run --> [starting] <------------- backoff ------------- [restarting]
//	          |    |                                          ^      ^
//	          |    +-------------- no revision ---------------+      |
//	          | revision R read; watches from R+1                    |
//	          v                                                      |
//	       [waiting] <------------- success -------------+           |
//	          | events (coalesced), resync tick          |           |
//	          v                                          |           |
//	  +--> [reconciling] --------------------------------+-- panic --+
//	  |       | error
//	  |       v
//	  +--- [backoff]  (retried on its timer, an event or the tick)
//
//	any state --- the group's context ends, or a fatal error ---> [stopped]
//
// The leader's controllers are one group: the coordinator runs them under
// its leadership term's context and they stop when the term ends. Fencing
// their writes on the term (store.Fence) is the controllers' business, not
// the runtime's.
//
// A controller whose inputs have no watch (files, the clock, a process)
// declares no prefix and a resync interval: it reconciles at start and on
// each tick; one that can tell when such an input changed also wakes on a
// channel (Waker). A controller may bring its own health rule (Policied), such as
// one whose reconcile rightly runs for long and must not count as stalled.
//
// Time comes from an injected clockwork.Clock, so that tests advance a fake
// clock instead of sleeping. Health and Healthy report each controller's
// last success, last error and restarts, for sd_notify WATCHDOG and metrics.
package controller
