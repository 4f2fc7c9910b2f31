package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
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
	return &controller.Func{ControllerName: "data-dir", Resync: every, Do: a.measureDataDir}
}

// measureDataDir is one pass of the data-dir controller.
func (a *Agent) measureDataDir(ctx context.Context) error {
	space := a.spaceOf
	if space == nil {
		space = fsSpace
	}
	free, size, err := space(a.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("agent: measure the etcd data dir: %w", err)
	}
	now := a.Now()
	d := &api.DataDirStatus{FreeBytes: free, SizeBytes: size, Full: free < api.DataDirFullBelow, MeasuredAt: now}
	var prev *api.DataDirStatus
	var report bool
	n, ok := a.rec.update(func(s *api.NodeStatus) {
		prev = s.DataDir
		report = prev == nil || prev.Full != d.Full || abs(prev.FreeBytes-d.FreeBytes) >= size/10
		if report {
			s.DataDir = d
		}
	})
	if !ok || !report {
		return nil
	}
	switch {
	case d.Full:
		a.log.Error("the etcd data dir's file system is full: the member cannot write its WAL or database and stops until space returns",
			"dataDir", a.cfg.DataDir, "freeBytes", free, "sizeBytes", size)
	case prev != nil && prev.Full:
		a.log.Info("the etcd data dir's file system has space again", "dataDir", a.cfg.DataDir, "freeBytes", free, "sizeBytes", size)
	}
	return a.writePhase(ctx, n.Status.Phase, n.Status.Message)
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
