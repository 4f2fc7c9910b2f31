package member

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"
)

// Journal reads what a unit logged. The Systemd runtime reads etcd's own
// line that says this member was removed from the cluster.
type Journal interface {
	// Lines returns the messages unit logged since t, oldest first.
	Lines(ctx context.Context, unit string, since time.Time) ([]string, error)
}

// Journalctl reads the journal through the journalctl binary (Path, or
// "journalctl" on PATH when empty).
type Journalctl struct {
	Path string
}

var _ Journal = Journalctl{}

// Lines runs `journalctl -u UNIT --since @SECONDS -o cat`. The start is
// rounded down to the second, so a line of the second before may be
// included.
func (j Journalctl) Lines(ctx context.Context, unit string, since time.Time) ([]string, error) {
	bin := j.Path
	if bin == "" {
		bin = "journalctl"
	}
	out, err := exec.CommandContext(ctx, bin, "--no-pager", "-q", "-o", "cat",
		"-u", unit, "--since", "@"+strconv.FormatInt(since.Unix(), 10)).Output()
	if err != nil {
		return nil, fmt.Errorf("member: journal of %s: %w", unit, err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines, sc.Err()
}
