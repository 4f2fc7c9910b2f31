package meshscale

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// repExit is the parent's own report type: the child exited (Err says how).
const repExit = "exit"

// tagged is a report and the child that sent it.
type tagged struct {
	child int
	r     report
}

// proc is one child process as the parent sees it.
type proc struct {
	spec   childSpec
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr string        // file holding its stderr
	done   chan struct{} // closed once it has exited and its stdout is read
	last   report        // its latest view
	// seenTimes are its members' SeenTimes of the victim seenOf.
	seenTimes []int64
	seenOf    string
}

// spawn starts the test binary as a child running spec; its reports, and
// finally a repExit, go to reports until ctx ends.
func spawn(ctx context.Context, dir string, spec childSpec, reports chan<- tagged) (*proc, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	p := &proc{spec: spec, stderr: filepath.Join(dir, fmt.Sprintf("child-%d.stderr", spec.Index)), done: make(chan struct{})}
	errf, err := os.Create(p.stderr)
	if err != nil {
		return nil, err
	}
	defer errf.Close() // the child holds its own copy
	p.cmd = exec.Command(os.Args[0])
	p.cmd.Env = append(os.Environ(), envChild+"="+string(js))
	p.cmd.Stderr = errf
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting child %d: %w", spec.Index, err)
	}
	go func() {
		defer close(p.done)
		deliver := func(r report) {
			select {
			case reports <- tagged{child: spec.Index, r: r}:
			case <-ctx.Done():
			}
		}
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			var r report
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				r = report{Type: repError, Err: fmt.Sprintf("unreadable report %q: %v", sc.Text(), err)}
			}
			deliver(r)
		}
		err := p.cmd.Wait() // after every read of stdout, as exec requires
		deliver(report{Type: repExit, Err: fmt.Sprint(err)})
	}()
	return p, nil
}

// send writes one command line to the child.
func (p *proc) send(verb, name string) error {
	_, err := fmt.Fprintf(p.stdin, "%s %s\n", verb, name)
	return err
}

// kill kills the child and waits until it has exited.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill() // fails only when it has exited already
	<-p.done
}

// stderrTail is the end of the child's stderr.
func (p *proc) stderrTail() string {
	b, err := os.ReadFile(p.stderr)
	if err != nil {
		return err.Error()
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return string(b)
}

// rssKiB is a process's resident set (VmRSS), 0 when unreadable.
func rssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kib, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kib
		}
	}
	return 0
}

// cpuSeconds is a process's user and system CPU time, 0 when unreadable.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis: state is the
	// first, utime and stime the 12th and 13th (in USER_HZ, 100 a second).
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

// runQueueSeconds is how long a process's threads have been runnable but
// waiting for a CPU, summed (the second field of each thread's schedstat).
func runQueueSeconds(pid int) float64 {
	dirs, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0
	}
	var ns float64
	for _, d := range dirs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, d.Name()))
		if err != nil {
			continue // the thread has exited
		}
		if f := strings.Fields(string(b)); len(f) >= 2 {
			v, _ := strconv.ParseFloat(f[1], 64)
			ns += v
		}
	}
	return ns / 1e9
}

// udpErrors is the host's count of UDP datagrams dropped on receive
// (InErrors of /proc/net/snmp, which includes RcvbufErrors).
func udpErrors() int64 {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return 0
	}
	var head []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if head == nil {
			head = f
			continue
		}
		for i, name := range head {
			if name == "InErrors" && i < len(f) {
				v, _ := strconv.ParseInt(f[i], 10, 64)
				return v
			}
		}
	}
	return 0
}

// loadavg is the host's load averages (1, 5, 15 minutes).
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
