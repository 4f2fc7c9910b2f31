package ctl

import (
	"fmt"
	"io"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/schollz/progressbar/v3"
)

// rolloutProgress shows a followed rollout: a progress bar with the
// rollout's line as its description on a terminal, a line per change
// otherwise.
type rolloutProgress struct {
	w    io.Writer
	tty  bool
	bar  *progressbar.ProgressBar
	last string
}

func newRolloutProgress(w io.Writer, tty bool) *rolloutProgress {
	return &rolloutProgress{w: w, tty: tty}
}

// show draws r as of now.
func (p *rolloutProgress) show(r *api.Rollout, now time.Time) {
	line := rolloutLine(r, now)
	if !p.tty {
		if line != p.last {
			fmt.Fprintln(p.w, line)
		}
		p.last = line
		return
	}
	done, total := r.Counts()
	if p.bar == nil {
		p.bar = progressbar.NewOptions(max(total, 1),
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(false), // rolloutLine has the estimate
			progressbar.OptionSetElapsedTime(false),
		)
	}
	if total > 0 && p.bar.GetMax() != total {
		p.bar.ChangeMax(total)
	}
	p.bar.Describe(line)
	_ = p.bar.Set(done)
}

// close ends the bar's line on a terminal; it may be called again.
func (p *rolloutProgress) close() {
	if p.bar != nil {
		_ = p.bar.Exit()
		fmt.Fprintln(p.w)
		p.bar = nil
	}
}
