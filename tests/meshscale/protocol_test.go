package meshscale

// envChild carries a child's spec (JSON); the test binary runs as a child
// when it is set (TestMain).
const envChild = "NICO_MESHSCALE_CHILD"

// childSpec is what a child runs.
type childSpec struct {
	Index int      // child number; child 0 holds the seeds
	Total int      // members in the whole mesh
	Count int      // members in this child
	IP    string   // loopback address its members bind
	Seeds []string // host:port of child 0's seed members (empty for child 0)
	Tune  string   // memberlist timings: large, lan or wan (tuneFor)
}

// seedMembers is how many of child 0's first members are the others' seeds.
const seedMembers = 3

// Report types, child to parent.
const (
	repSeeds   = "seeds"   // Addrs: child 0's seed members are up
	repStarted = "started" // every member of the child has started; BaseKiB
	repView    = "view"    // the child's members' views, every viewEvery
	repCrashed = "crashed" // Victim was shut down at At
	repError   = "error"   // Err: the child cannot go on
)

// report is one line from a child. Times are Unix nanoseconds of the
// shared host clock (all processes run on one machine).
type report struct {
	Type  string   `json:"type"`
	At    int64    `json:"at"`
	Addrs []string `json:"addrs,omitempty"`
	Err   string   `json:"err,omitempty"`
	// BaseKiB is the child's resident memory before its first member.
	BaseKiB int64 `json:"baseKiB,omitempty"`

	// Members is how many of the child's members run (crashed ones not
	// counted); Want is the alive count each should see.
	Members int `json:"members,omitempty"`
	Want    int `json:"want,omitempty"`
	// Full is how many members see Want alive; FullSince is when all of
	// them first did in the current run of reports (0: not all do).
	Full       int   `json:"full"`
	FullSince  int64 `json:"fullSince,omitempty"`
	AliveViews int   `json:"aliveViews"`
	// SuspectViews counts the (member, peer) views suspect, KnownViews
	// those of any state: a member that has not heard of a peer lacks one.
	SuspectViews int `json:"suspectViews,omitempty"`
	KnownViews   int `json:"knownViews,omitempty"`

	// Victim is the member being watched (repView) or crashed (repCrashed).
	// Seen counts the members that see it suspect or dead, Dead those that
	// see it dead; LastSeen and LastDead are the latest, over those
	// members, of the time each first saw it so (its own state clock).
	Victim   string `json:"victim,omitempty"`
	Seen     int    `json:"seen,omitempty"`
	Dead     int    `json:"dead,omitempty"`
	LastSeen int64  `json:"lastSeen,omitempty"`
	LastDead int64  `json:"lastDead,omitempty"`
	// SeenTimes lists, once every member has seen the victim suspect or
	// dead, when each first did (in the first such report only).
	SeenTimes []int64 `json:"seenTimes,omitempty"`
	// Unseen names a member that sees the victim neither suspect nor dead.
	Unseen string `json:"unseen,omitempty"`
}

// Commands, parent to child, one a line.
const (
	cmdWatch = "watch" // watch NAME: count who sees NAME suspect or dead
	cmdCrash = "crash" // crash NAME: shut NAME down without leaving, then watch it
)
