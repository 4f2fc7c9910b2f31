package fleetkit

import (
	"runtime/metrics"
	"syscall"
	"time"
)

// ProcessCPU is this process's user and system time; its children (etcd
// members, agent hosts) are not in it.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// HeapAllocs is how many heap objects and bytes this process has
// allocated so far.
func HeapAllocs() (objects, bytes uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}
