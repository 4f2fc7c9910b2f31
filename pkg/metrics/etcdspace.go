package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// EtcdSpace holds the coordinator's metrics of etcd's space: active
// alarms, each member's database size and quota, and the free space of
// each node's etcd data dir as its agent reported it. The leader sets them
// on each pass of its etcd-status controller, NOSPACE included (the store
// refuses every write then, so only these and the logs tell); a candidate
// that stops leading drops them.
type EtcdSpace struct {
	alarm    *prometheus.GaugeVec
	dbSize   *prometheus.GaugeVec
	dbQuota  *prometheus.GaugeVec
	dirFree  *prometheus.GaugeVec
	dirSize  *prometheus.GaugeVec
	dirFull  *prometheus.GaugeVec
	mu       sync.Mutex
	lastSets map[*prometheus.GaugeVec][][]string
}

// MemberSpace is one member's database size and quota, by its node (or
// etcd name).
type MemberSpace struct {
	Member              string
	DBSize, DBSizeQuota int64
}

// SpaceAlarm is one active etcd alarm.
type SpaceAlarm struct{ Member, Type string }

// DataDir is one node's data dir as its agent reported it.
type DataDir struct {
	Node       string
	Free, Size int64
	Full       bool
}

func newEtcdSpace(r *Registry) *EtcdSpace {
	e := &EtcdSpace{
		alarm:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nico_etcd_alarm", Help: "1 for each of etcd's active alarms, by member and type (NOSPACE, CORRUPT)."}, []string{"member", "type"}),
		dbSize:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nico_etcd_db_size_bytes", Help: "Each etcd member's database file size, by member."}, []string{"member"}),
		dbQuota:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nico_etcd_db_quota_bytes", Help: "Each etcd member's database quota (past it etcd raises NOSPACE), by member."}, []string{"member"}),
		dirFree:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nico_etcd_data_dir_free_bytes", Help: "Free space of the file system of each node's etcd data dir, as its agent last reported it."}, []string{"node"}),
		dirSize:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nico_etcd_data_dir_size_bytes", Help: "Size of the file system of each node's etcd data dir, as its agent last reported it."}, []string{"node"}),
		dirFull:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nico_etcd_data_dir_full", Help: "1 while a node's agent reports its etcd data dir full (less than 64 MiB free), else 0."}, []string{"node"}),
		lastSets: map[*prometheus.GaugeVec][][]string{},
	}
	r.MustRegister(e.alarm, e.dbSize, e.dbQuota, e.dirFree, e.dirSize, e.dirFull)
	return e
}

// Observe sets the gauges from one pass: the active alarms, the members'
// sizes and quotas (a zero size: not known) and the nodes' data dirs.
// Series of members, nodes and alarms that went away are deleted.
func (e *EtcdSpace) Observe(alarms []SpaceAlarm, members []MemberSpace, dirs []DataDir) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	sets := map[*prometheus.GaugeVec][][]string{}
	set := func(v *prometheus.GaugeVec, val float64, labels ...string) {
		v.WithLabelValues(labels...).Set(val)
		sets[v] = append(sets[v], labels)
	}
	for _, a := range alarms {
		set(e.alarm, 1, a.Member, a.Type)
	}
	for _, m := range members {
		if m.DBSize > 0 {
			set(e.dbSize, float64(m.DBSize), m.Member)
		}
		if m.DBSizeQuota > 0 {
			set(e.dbQuota, float64(m.DBSizeQuota), m.Member)
		}
	}
	for _, d := range dirs {
		set(e.dirFree, float64(d.Free), d.Node)
		set(e.dirSize, float64(d.Size), d.Node)
		full := 0.0
		if d.Full {
			full = 1
		}
		set(e.dirFull, full, d.Node)
	}
	for _, v := range []*prometheus.GaugeVec{e.alarm, e.dbSize, e.dbQuota, e.dirFree, e.dirSize, e.dirFull} {
		for _, old := range e.lastSets[v] {
			if !containsLabels(sets[v], old) {
				v.DeleteLabelValues(old...)
			}
		}
	}
	e.lastSets = sets
}

// reset drops every series (the candidate stopped leading).
func (e *EtcdSpace) reset() {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, v := range []*prometheus.GaugeVec{e.alarm, e.dbSize, e.dbQuota, e.dirFree, e.dirSize, e.dirFull} {
		v.Reset()
	}
	clear(e.lastSets)
}

func containsLabels(sets [][]string, l []string) bool {
	for _, s := range sets {
		if len(s) == len(l) {
			same := true
			for i := range s {
				same = same && s[i] == l[i]
			}
			if same {
				return true
			}
		}
	}
	return false
}
