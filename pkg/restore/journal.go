package restore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// Kind is what a Journal does.
type Kind string

// Kinds of Journal.
const (
	KindRestore Kind = "Restore" // from a snapshot, as a new cluster
	KindRecover Kind = "Recover" // quorum lost: a survivor forced into a new cluster
)

// Step is where a Journal is; see the package doc's diagram.
type Step string

// Steps, in order.
const (
	StepStop    Step = "StopAndFence"
	StepRestore Step = "RestoreTarget"
	StepStart   Step = "StartTarget"
	StepRecord  Step = "JournalInNewCluster"
	StepRejoin  Step = "RejoinOthers"
	StepFinish  Step = "ReleaseSlot"
	StepDone    Step = "Done"
)

// Journal is one restore or recovery, saved after every step so that a
// killed nicoctl resumes where it stopped. It lives outside etcd (the
// cluster it restores is down meanwhile) and is copied into the new
// cluster as an Operation once that serves.
type Journal struct {
	ID     string `json:"id"`
	Kind   Kind   `json:"kind"`
	Target string `json:"target"`
	// Others rejoin in this order, through the learner path.
	Others []string `json:"others"`
	// Standbys are the control-plane hosts that were not members (not
	// voters of the cluster restored): the restore leaves them as they are.
	Standbys []string `json:"standbys,omitempty"`
	Snapshot Info     `json:"snapshot,omitzero"`
	// BumpRevision is added to the snapshot's revision (etcdutl's
	// --bump-revision); the restore also marks it compacted.
	BumpRevision uint64 `json:"bumpRevision,omitempty"`
	Step         Step   `json:"step"`
	// Rejoined counts the Others already voters of the new cluster.
	Rejoined     int    `json:"rejoined"`
	NewClusterID uint64 `json:"newClusterID,omitempty"`
	// Lineage is what the new cluster's ClusterLineage gets: the fleet's
	// earlier clusters, the snapshot's and the old one's included.
	Lineage   []api.EarlierCluster `json:"lineage,omitempty"`
	StartedAt time.Time            `json:"startedAt"`
	UpdatedAt time.Time            `json:"updatedAt"`
	History   []string             `json:"history,omitempty"`
}

// record appends a line to the history.
func (j *Journal) record(at time.Time, step Step, msg string) {
	j.UpdatedAt = at
	j.History = append(j.History, at.UTC().Format(time.RFC3339Nano)+" "+string(step)+": "+msg)
	if n := len(j.History); n > 64 {
		j.History = j.History[n-64:]
	}
}

// FileJournal keeps a Journal in one JSON file, replaced atomically.
type FileJournal struct{ Path string }

// Load reads the journal; ok is false when there is none.
func (f FileJournal) Load() (j *Journal, ok bool, err error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("restore: read journal: %w", err)
	}
	j = &Journal{}
	if err := json.Unmarshal(b, j); err != nil {
		return nil, false, fmt.Errorf("restore: decode journal %s: %w", f.Path, err)
	}
	return j, true, nil
}

// Save writes j (temp file, sync, rename).
func (f FileJournal) Save(j *Journal) error {
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return fmt.Errorf("restore: encode journal: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.Path), ".journal-*")
	if err != nil {
		return fmt.Errorf("restore: write journal: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err = tmp.Write(append(b, '\n')); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("restore: write journal %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		return fmt.Errorf("restore: install journal %s: %w", f.Path, err)
	}
	return nil
}
