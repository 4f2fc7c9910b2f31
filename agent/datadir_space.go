package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"syscall"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
)

// DefaultDataDirInterval is how often the data-dir controller measures the
// file system of the etcd data dir.
const DefaultDataDirInterval = 10 * time.Second

// The data-dir controller measures the free space of the file system that
// holds the etcd data dir and reports it in the node's status
// (Node.Status.DataDir) when it matters: the first measurement, the data
// dir turning full (less than api.DataDirFullBelow free) or back, or the
// free space moving by a tenth of the file system since the last report.
// On a full disk etcd cannot write its WAL, snapshot or database and the
// member exits; this is what tells the operator why (the coordinator
// exports it, an event and an alert follow).
//
//	not reported ----------------------------> report
//	full != reported full -------------------> report (and log)
//	|free - reported free| >= size/10 -------> report
//	otherwise -------------------------------> nothing

// dataDirWatch is the data-dir controller.
func (a *Agent) dataDirWatch() controller.Controller {
	every := a.cfg.DataDirInterval
	if every <= 0 {
		every = DefaultDataDirInterval
	}
	return &controller.Func{ControllerName: "data-dir", Resync: every, Do: a.dataDirSpace().measure}
}

// dataDirSpace is what the data-dir controller uses.
type dataDirSpace struct {
	dir string // the etcd data dir
	// space measures the file system holding a path (fsSpace; tests
	// replace it).
	space func(path string) (free, size int64, err error)
	now   func() time.Time
	rec   *nodeRecord // the node's status, which the report goes into
	// write writes the node's status with its phase and message.
	write func(ctx context.Context, phase api.NodePhase, msg string) error
	log   *slog.Logger
}

// dataDirSpace is the data-dir controller's dependencies, taken from a.
func (a *Agent) dataDirSpace() *dataDirSpace {
	return &dataDirSpace{dir: a.cfg.DataDir, space: fsSpace, now: func() time.Time { return a.Now() }, rec: &a.rec, write: a.node.writePhase, log: a.log}
}

// measure is one pass of the data-dir controller.
func (d *dataDirSpace) measure(ctx context.Context) error {
	free, size, err := d.space(d.dir)
	if err != nil {
		return fmt.Errorf("agent: measure the etcd data dir: %w", err)
	}
	now := d.now()
	m := &api.DataDirStatus{FreeBytes: free, SizeBytes: size, Full: free < api.DataDirFullBelow, MeasuredAt: now}
	var prev *api.DataDirStatus
	var report bool
	n, ok := d.rec.update(func(s *api.NodeStatus) {
		prev = s.DataDir
		report = prev == nil || prev.Full != m.Full || abs(prev.FreeBytes-m.FreeBytes) >= size/10
		if report {
			s.DataDir = m
		}
	})
	if !ok || !report {
		return nil
	}
	switch {
	case m.Full:
		d.log.Error("the etcd data dir's file system is full: the member cannot write its WAL or database and stops until space returns",
			"dataDir", d.dir, "freeBytes", free, "sizeBytes", size)
	case prev != nil && prev.Full:
		d.log.Info("the etcd data dir's file system has space again", "dataDir", d.dir, "freeBytes", free, "sizeBytes", size)
	}
	return d.write(ctx, n.Status.Phase, n.Status.Message)
}

// fsSpace is the free (to unprivileged users) and total bytes of the file
// system holding path, or of its nearest existing parent (a data dir not
// made yet, or moved aside by a wipe).
func fsSpace(path string) (free, size int64, err error) {
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		var st syscall.Statfs_t
		err := syscall.Statfs(p, &st)
		if err == nil {
			return int64(st.Bavail) * int64(st.Bsize), int64(st.Blocks) * int64(st.Bsize), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || p == filepath.Dir(p) {
			return 0, 0, fmt.Errorf("statfs %s: %w", p, err)
		}
	}
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
