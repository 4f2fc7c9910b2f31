package scale

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/logging"
)

var flagLog = flag.String("nico.log", "", "log the coordinator to stderr at this level (debug, info, warn)")

func quietLogger() *slog.Logger {
	if *flagLog == "" {
		return slog.New(slog.DiscardHandler)
	}
	log, err := logging.New(os.Stderr, *flagLog, "text")
	if err != nil {
		panic(fmt.Sprintf("-nico.log: %v", err))
	}
	return log
}

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// procCPU is process pid's user and system time (0 once it is gone).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name may hold spaces: fields count from after its ")".
	s := string(b)
	fs := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fs) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(fs[11], 10, 64)
	st, _ := strconv.ParseInt(fs[12], 10, 64)
	return time.Duration(ut+st) * clockTick
}

// cost is what one measured interval took, in this process (the
// coordinator), in the agent hosts and in the store.
type cost struct {
	wall          time.Duration
	cpu           time.Duration // this process
	allocs, bytes uint64        // this process's heap allocations
	agentsCPU     time.Duration // the agent hosts
	revisions     int64         // the store's revisions
	requests      float64       // the etcd members' client requests
}

type meter struct {
	t0            time.Time
	cpu, agents   time.Duration
	allocs, bytes uint64
	rev           int64
	requests      float64
}
