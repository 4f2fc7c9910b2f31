//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

func init() {
	modes := map[string]string{}
	for _, e := range strings.Split(os.Getenv(Env), ",") {
		name, mode, _ := strings.Cut(strings.TrimSpace(e), ":")
		if name != "" {
			modes[name] = mode
		}
	}
	dir := os.Getenv(EnvDir)
	var mu sync.Mutex
	released := map[string]bool{}
	Hit = func(name string) {
		mode, ok := modes[name]
		if !ok {
			return
		}
		if mode != ModePause || dir == "" {
			fmt.Fprintf(os.Stderr, "failpoint %s: exiting with status %d\n", name, ExitCode)
			os.Exit(ExitCode)
		}
		mu.Lock()
		defer mu.Unlock()
		if released[name] {
			return
		}
		pause(dir, name)
		released[name] = true
	}
}

// pause marks name reached and blocks until its release file exists.
func pause(dir, name string) {
	fmt.Fprintf(os.Stderr, "failpoint %s: paused until %s exists\n", name, ReleaseFile(dir, name))
	if err := os.WriteFile(ReachedFile(dir, name), nil, 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "failpoint %s: %v\n", name, err)
	}
	for {
		if _, err := os.Stat(ReleaseFile(dir, name)); err == nil {
			fmt.Fprintf(os.Stderr, "failpoint %s: released\n", name)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
