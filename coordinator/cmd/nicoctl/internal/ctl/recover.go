package ctl

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/homystack/nico/pkg/restore"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// recoverOpts are the flags of recover.
type recoverOpts struct {
	fleet, journal string
	replace        []string
	agents         []string
	voters         int
	yes            bool
	handBackWait   time.Duration
}

func (a *app) recoverCmd() *cobra.Command {
	var o recoverOpts
	c := &cobra.Command{
		Use:   "recover (--agents HOST:PORT,... | --fleet FILE) [--yes]",
		Short: "Recover from a lost quorum: make the most advanced survivor a one-member cluster, then rejoin the others",
		Long: `Recover the etcd cluster after a majority of its voters is gone for good
(docs/disaster-recovery.md).

nicoctl asks every member of --fleet for its status (a member answers it without a
quorum), lists the survivors with their applied index and revision, and proposes the
most advanced one. It refuses (exit 3, nothing changed) when the cluster still has
quorum: a majority of --voters answers, or a linearizable read does. Nothing is done
without confirmation: --yes, "yes" typed at the prompt on a terminal, or the
EtcdCluster's spec.policy.recoverWithoutConfirmation (read from the survivor). Then every
member is stopped (the others' data dirs fenced), the survivor is started with
--force-new-cluster (a one-member cluster with everything it had applied), and the
other survivors, then the --replace nodes (new machines for the lost members, empty
data dirs), rejoin one at a time as learners. Journaled in --journal like restore:
run the same command again to resume.

With --agents instead of --fleet, the survivors are what each control-plane agent
reports of its own host (found from the given agents' gossip mesh; a lost host is
listed as not answering), and each agent does its host's part (see restore).`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error { return a.recover(cmd.Context(), o, os.Stdin) }),
	}
	c.Flags().StringVar(&o.fleet, "fleet", "", "YAML file naming the control-plane members (as for restore)")
	c.Flags().StringVar(&o.journal, "journal", "", "the operation's journal file, shared with restore (default: FILE.journal.json beside --fleet)")
	c.Flags().StringSliceVar(&o.replace, "replace", nil, "members of --fleet that replace lost ones (empty data dirs), to join after the survivors")
	c.Flags().IntVar(&o.voters, "voters", 0, "how many voters the cluster had (default: the members of --fleet)")
	c.Flags().StringSliceVar(&o.agents, "agents", nil, "recover through the control-plane agents instead of --fleet: host:port of one or more agents' recovery API (recovery.listen); the others are found from their gossip mesh, the survivors from what each agent reports")
	c.Flags().BoolVar(&o.yes, "yes", false, "do it without asking")
	c.Flags().DurationVar(&o.handBackWait, "hand-back-wait", releaseWait, handBackHelp)
	return c
}

func (a *app) recover(ctx context.Context, o recoverOpts, stdin io.Reader) error {
	if len(o.agents) > 0 {
		return a.recoverThroughAgents(ctx, o, stdin)
	}
	if o.fleet == "" {
		return withCode(ExitUsage, errors.New("recover needs --agents HOST:PORT or --fleet FILE"))
	}
	if o.journal == "" {
		o.journal = journalOf(o.fleet)
	}
	jf := restore.FileJournal{Path: o.journal}
	j, resumed, err := a.resumable(jf, restore.KindRecover, func(*restore.Journal) bool { return true })
	if err != nil {
		return err
	}
	fleet, err := restore.LoadFleet(o.fleet, "", a.logger())
	if err != nil {
		return withCode(ExitUsage, err)
	}
	defer fleet.Close()
	if resumed {
		return a.runJournal(ctx, fleet, jf, j)
	}
	if o.voters == 0 {
		o.voters = len(fleet.Members) - len(o.replace)
	}
	urls := fleet.URLs()
	for _, r := range o.replace {
		if _, ok := urls[r]; !ok {
			return withCode(ExitUsage, fmt.Errorf("--replace %q is not a member of --fleet (members: %s)", r, strings.Join(fleet.Names(), ", ")))
		}
		delete(urls, r)
	}
	timeout := max(a.cfg.Timeout/2, time.Second)
	j, err = a.proposeRecovery(ctx, o, jf, restore.Survey(ctx, urls, fleet.ClientTLS, timeout), fleet.ClientTLS, timeout, "", stdin)
	if err != nil {
		return err
	}
	return a.runJournal(ctx, fleet, jf, j)
}

// proposeRecovery lists the survivors, refuses while the cluster still has
// quorum (o.voters), proposes the most advanced survivor (how says how it
// is recovered, after "a one-member cluster") and, once confirmed, saves
// the recovery's journal in jf and returns it.
func (a *app) proposeRecovery(ctx context.Context, o recoverOpts, jf restore.FileJournal, survivors []restore.Survivor, clientTLS *tls.Config, timeout time.Duration, how string, stdin io.Reader) (*restore.Journal, error) {
	a.printSurvivors(survivors)
	if err := restore.CheckQuorumLost(ctx, survivors, o.voters, clientTLS, timeout); err != nil {
		return nil, withCode(ExitRefused, fmt.Errorf("recover refused: %w", err))
	}
	j, err := restore.RecoverJournal(survivors, o.replace, a.now())
	if err != nil {
		return nil, withCode(ExitRefused, err)
	}
	fmt.Fprintf(a.stdout, "proposal: make %s (applied index %d, revision %d) a one-member cluster%s; then %v rejoin as learners\n",
		j.Target, survivors[0].Applied, survivors[0].Revision, how, j.Others)
	allowed, err := restore.RecoveryAllowed(ctx, survivors[0].ClientURL, a.cfg.Prefix, clientTLS, timeout)
	if err != nil {
		fmt.Fprintf(a.stderr, "nicoctl: %v: asking for confirmation\n", err)
	}
	if allowed && !o.yes {
		fmt.Fprintln(a.stdout, "the EtcdCluster's spec.policy.recoverWithoutConfirmation allows it: going on")
	}
	if !o.yes && !allowed && !confirmed(stdin, a.stdout) {
		return nil, withCode(ExitRefused, errors.New("recover not confirmed: nothing changed (answer yes at the prompt, or pass --yes)"))
	}
	if err := jf.Save(j); err != nil {
		return nil, err
	}
	return j, nil
}

// confirmed asks on a terminal; anything but "yes", or no terminal, is no.
func confirmed(stdin io.Reader, out io.Writer) bool {
	f, ok := stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false
	}
	fmt.Fprint(out, "type yes to go on: ")
	line, _ := bufio.NewReader(stdin).ReadString('\n')
	return strings.TrimSpace(line) == "yes"
}

func (a *app) printSurvivors(ss []restore.Survivor) {
	w := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tCLIENT URL\tAPPLIED\tREVISION\tTERM\tSTATE")
	for _, s := range ss {
		state := "voter"
		switch {
		case s.Err != "":
			state = "no answer: " + s.Err
		case s.Learner:
			state = "learner"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\n", s.Node, s.ClientURL, s.Applied, s.Revision, s.RaftTerm, state)
	}
	w.Flush()
}
