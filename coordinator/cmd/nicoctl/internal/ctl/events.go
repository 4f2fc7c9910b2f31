package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/events"
	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/cobra"
)

const eventsHelp = `Show what happened in the fleet, oldest first: the steps of every operation
in the journal (joins: JoinStarted, LearnerAdded, Promoted, Joined; removals:
RemovalStarted, LeadershipMoved, RemovingMember, Removed; rollout steps),
join and removal requests (Refused with its reason), rollouts (RolloutStarted,
NodeUpdated, RolledBack, RolloutHalted...), generations applied or failed,
node registrations and liveness (NodeAlive, NodeSuspect, NodeDead), gossip
key rotations, and the conditions of machines, pools and the etcd cluster.

Without -w it prints the events the stored objects still record (an
operation keeps its last 32 steps; an object that records only its current
state, such as a node's liveness, gives only that) and ends. With -w it then
follows new events as they are written, from an etcd watch that starts at
the revision the backlog was read at: nothing between the two is missed or
printed twice. A node's phase changes and deletions carry no time of their
own and are seen only while watching. If etcd compacted the revision before
the watch reached it, nicoctl reads the store again, prints what changed
meanwhile (one change per object) and says so on standard error; if the
member it watches has no leader, it says so and watches again from where it
was until one is elected.

Times are the writers' clocks, in UTC. The backlog is sorted by time; watched
events come in the order etcd committed them.

--for narrows the events to one thing:
  node/NAME    everything about a node: its requests, operations, rollout
               steps, generations, liveness and machine
  op/NAME      one operation (nicoctl get ops lists them)
  cluster/NAME one KubernetesCluster (nicoctl get clusters lists them)

-o json prints one JSON object per line, with these fields, always present:
  time      RFC 3339 time with nanoseconds
  kind      kind of the object it was read from (Operation, JoinRequest,
            RemoveRequest, Node, Liveness, Rollout, NixosConfiguration,
            Machine, MachinePool, EtcdCluster, GossipKey, KubernetesCluster)
  name      that object's name
  type      Normal or Warning
  reason    what happened, one CamelCase word
  message   what happened, for people
  nodes     the nodes it concerns (a list, maybe empty)
  op        the operation it belongs to ("" when none)
  revision  the etcd revision of the change it was read from

Exit codes: 0 when the events are printed (with -w: when interrupted), 2 for
bad flags or an unreachable cluster, 4 when --for names a node or operation
of which nothing is known (without -w), 1 when reading or watching fails.`

// eventsOptions are the flags of nicoctl events.
type eventsOptions struct {
	watch bool
	fr    string
	since string
}

func (a *app) eventsCmd() *cobra.Command {
	var o eventsOptions
	c := &cobra.Command{
		Use:   "events",
		Short: "Show what happened in the fleet (-w: and follow it)",
		Long:  eventsHelp,
		Args:  cobra.NoArgs,
		RunE:  runE(func(cmd *cobra.Command, _ []string) error { return a.events(cmd.Context(), o) }),
	}
	c.Flags().BoolVarP(&o.watch, "watch", "w", false, "after the recorded events, follow new ones until interrupted")
	c.Flags().StringVar(&o.fr, "for", "", "only the events of node/NAME, op/NAME or cluster/NAME")
	c.Flags().StringVar(&o.since, "since", "", "only events from this long ago (a duration such as 1h) or this time (RFC 3339) on; default: all")
	return c
}

// eventFilter selects the events nicoctl events prints.
type eventFilter struct {
	kind, name string // kind "" selects every event
	since      time.Time
}

func (f eventFilter) match(e events.Event) bool {
	switch f.kind {
	case "node":
		return e.About(f.name)
	case "op":
		return e.Op == f.name
	case "cluster":
		return e.Kind == api.KindKubernetesCluster && e.Name == f.name
	}
	return true
}

// parseFor reads --for.
func parseFor(s string) (kind, name string, err error) {
	if s == "" {
		return "", "", nil
	}
	kind, name, ok := strings.Cut(s, "/")
	bad := func(why string) error {
		return withCode(ExitUsage, fmt.Errorf("--for %q: %s; use node/NAME, op/NAME or cluster/NAME", s, why))
	}
	switch {
	case !ok || name == "" || strings.Contains(name, "/"):
		return "", "", bad("want KIND/NAME")
	case kind == "node" || kind == "op":
		return kind, name, nil
	case kind == "operation":
		return "op", name, nil
	case kind == "cluster" || kind == "kubernetescluster":
		return "cluster", name, nil
	default:
		return "", "", bad(fmt.Sprintf("kind %q is not accepted", kind))
	}
}

// parseSince reads --since relative to now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, withCode(ExitUsage, fmt.Errorf("--since %q: want a positive duration such as 90m or an RFC 3339 time such as 2026-01-02T15:04:05Z", s))
}

func (a *app) events(ctx context.Context, o eventsOptions) error {
	var f eventFilter
	var err error
	if f.kind, f.name, err = parseFor(o.fr); err != nil {
		return err
	}
	if f.since, err = parseSince(o.since, a.now()); err != nil {
		return err
	}
	out, err := a.eventWriter()
	if err != nil {
		return err
	}
	c, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	feed := events.NewFeed(c.st, a.now)
	rctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	backlog, bad, err := feed.Backlog(rctx)
	cancel()
	if err != nil {
		return fmt.Errorf("reading the events: %w", err)
	}
	a.skipped(bad...)
	var shown []events.Event
	for _, e := range backlog {
		if f.match(e) && !e.Time.Before(f.since) {
			shown = append(shown, e)
		}
	}
	if len(shown) == 0 && f.kind != "" {
		if err := a.unknownTarget(feed, f, len(backlog) > 0 && anyMatch(backlog, f), o.watch); err != nil {
			return err
		}
	}
	if err := out.header(); err != nil {
		return err
	}
	for _, e := range shown {
		if err := out.write(e); err != nil {
			return err
		}
	}
	if !o.watch {
		return nil
	}
	return feed.Follow(ctx, events.Handler{
		Event: func(e events.Event) error {
			if !f.match(e) {
				return nil
			}
			return out.write(e)
		},
		Bad:    func(err error) { a.skipped(err) },
		Notice: func(s string) { fmt.Fprintf(a.stderr, "nicoctl: %s\n", s) },
	})
}

func anyMatch(evs []events.Event, f eventFilter) bool {
	for _, e := range evs {
		if f.match(e) {
			return true
		}
	}
	return false
}

// unknownTarget answers a --for that matched no event: not found when
// nothing is known of it, unless watching (it may yet appear).
func (a *app) unknownTarget(feed *events.Feed, f eventFilter, seen, watch bool) error {
	key := store.NodeKey(f.name)
	what, list := "node", "nicoctl get nodes"
	switch f.kind {
	case "op":
		key, what, list = store.OpKey(f.name), "operation", "nicoctl get ops"
	case "cluster":
		key, what, list = store.ClusterKey(f.name), "KubernetesCluster", "nicoctl get clusters"
	}
	if seen || feed.Has(key) {
		return nil
	}
	if watch {
		fmt.Fprintf(a.stderr, "nicoctl: no %s named %s yet; waiting for its events\n", what, f.name)
		return nil
	}
	return withCode(ExitNotFound, fmt.Errorf("no %s named %s and no event about it; list them with '%s'", what, f.name, list))
}

// skipped tells the user about objects whose events could not be read.
func (a *app) skipped(errs ...error) {
	for _, err := range errs {
		fmt.Fprintf(a.stderr, "nicoctl: skipped an object: %v\n", err)
	}
}

// eventWriter prints events one line each: a table or JSON lines.
type eventWriter struct {
	w    io.Writer
	json bool
}

func (a *app) eventWriter() (*eventWriter, error) {
	switch a.cfg.Output {
	case "table", "":
		return &eventWriter{w: a.stdout}, nil
	case "json":
		return &eventWriter{w: a.stdout, json: true}, nil
	default:
		return nil, withCode(ExitUsage, fmt.Errorf("output %q is not accepted by events; use table or json (one object per line)", a.cfg.Output))
	}
}

// eventLine is the table's row format: fixed widths, so that rows printed
// as they come line up without buffering.
const eventLine = "%-24s  %-7s  %-32s  %-18s  %s\n"

func (w *eventWriter) header() error {
	if w.json {
		return nil
	}
	_, err := fmt.Fprintf(w.w, eventLine, "TIME", "TYPE", "OBJECT", "REASON", "MESSAGE")
	return err
}

func (w *eventWriter) write(e events.Event) error {
	if w.json {
		return json.NewEncoder(w.w).Encode(e)
	}
	_, err := fmt.Fprintf(w.w, eventLine, e.Time.UTC().Format("2006-01-02T15:04:05.000Z"), e.Type, e.Object(), e.Reason, oneLine(e.Message))
	return err
}
