package scale

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
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

// selfCPU is this process's user and system time: the coordinator and
// the harness's waits (the members and agent hosts are children).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapAllocs() (objects, bytes uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// cost is what one measured interval took, in this process (the
// coordinator), in the agent hosts and in the store.
type cost struct {
	wall          time.Duration
	cpu           time.Duration // this process
	allocs, bytes uint64        // this process's heap allocations
	agentsCPU     time.Duration // the agent hosts
	revisions     int64         // the store's revisions
}

type meter struct {
	t0            time.Time
	cpu, agents   time.Duration
	allocs, bytes uint64
	rev           int64
}
