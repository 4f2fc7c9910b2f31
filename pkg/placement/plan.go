package placement

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// Input is everything the planner reads.
type Input struct {
	Pools    []*api.MachinePool
	Machines []*api.Machine
	Hosts    []*Host
	// Nodes are the registered nodes by name; Removals the removal requests.
	Nodes    map[string]*api.Node
	Removals map[string]*api.RemoveRequest
	// Claims are the declared clusters' asks of the pools (claims.go).
	Claims []*api.MachineClaim
	Now    time.Time
}

// Plan is what the leader should write. Objects are copies: applying the
// plan writes them as they are.
type Plan struct {
	// Create are new machines, placed or Pending. Their UUID is empty: the
	// executor chooses it.
	Create []*api.Machine
	// Update are machines whose spec or leader-owned status changed.
	Update []*api.Machine
	// Delete are machines whose object is to be removed: never placed, or
	// undefined by their host.
	Delete []*api.Machine
	// RequestRemoval are nodes whose safe removal is to be filed.
	RequestRemoval []string
	// Pools are pools whose status changed.
	Pools []*api.MachinePool
	// Claims are claims whose status changed.
	Claims []*api.MachineClaim
}

// Empty tells whether the plan writes nothing.
func (p Plan) Empty() bool {
	return len(p.Create)+len(p.Update)+len(p.Delete)+len(p.RequestRemoval)+len(p.Pools)+len(p.Claims) == 0
}

// Counts summarizes the plan for logs.
func (p Plan) Counts() string {
	return fmt.Sprintf("create=%d update=%d delete=%d removals=%d pools=%d claims=%d", len(p.Create), len(p.Update), len(p.Delete), len(p.RequestRemoval), len(p.Pools), len(p.Claims))
}

// MachineName is the name of a pool's machine with ordinal i; it is also
// the name of the machine's node.
func MachineName(pool string, i int) string { return fmt.Sprintf("%s-%d", pool, i) }

// Compute plans one pass. It is pure: the same input gives the same plan.
func Compute(in Input) Plan {
	p := &planner{in: in, byPool: map[string][]*api.Machine{}, byClaim: map[string][]*api.Machine{}, hostByName: map[string]*Host{}}
	for _, h := range in.Hosts {
		c := *h // the planner's accounting never leaks into the input
		p.hosts = append(p.hosts, &c)
	}
	slices.SortFunc(p.hosts, func(a, b *Host) int { return cmp.Compare(a.Name, b.Name) })
	hostByName := p.hostByName
	for _, h := range p.hosts {
		h.used, h.perPool = usage{diskGiB: map[string]int{}}, map[string]int{}
		hostByName[h.Name] = h
	}
	for _, m := range in.Machines {
		if m.Spec.Kind != api.MachineLibvirt {
			continue
		}
		p.byPool[m.Spec.Pool] = append(p.byPool[m.Spec.Pool], m)
		if m.Spec.Claim != "" {
			p.byClaim[m.Spec.Claim] = append(p.byClaim[m.Spec.Claim], m)
		}
		if h := hostByName[m.Spec.Host]; h != nil {
			h.used.add(m.Spec.Template, 1)
			h.perPool[m.Spec.Pool]++
		}
	}
	pools := slices.Clone(in.Pools)
	slices.SortFunc(pools, func(a, b *api.MachinePool) int { return cmp.Compare(a.Metadata.Name, b.Metadata.Name) })
	known := map[string]bool{}
	for _, pool := range pools {
		known[pool.Metadata.Name] = true
	}
	p.known = known
	for _, pool := range pools {
		p.pool(pool, hostByName)
	}
	// Machines of pools that no longer exist are surplus.
	for _, name := range slices.Sorted(maps.Keys(p.byPool)) {
		if !known[name] {
			for _, m := range p.byPool[name] {
				p.surplus(m)
			}
		}
	}
	p.claimsOfNoPool()
	return p.out
}

type planner struct {
	in         Input
	hosts      []*Host
	hostByName map[string]*Host
	byPool     map[string][]*api.Machine
	// byClaim are the claimed machines by claim; known the pools.
	byClaim map[string][]*api.Machine
	known   map[string]bool
	out     Plan
	// waits collects, per pool, the scale-down waits for its condition.
	waits []string
}

func (p *planner) pool(pool *api.MachinePool, hostByName map[string]*Host) {
	name := pool.Metadata.Name
	st := pool.Status
	st.Conditions = slices.Clone(st.Conditions)
	all := p.byPool[name]
	// The pool's own machines (its count); claimed ones follow their
	// claims (claims.go).
	machines := slices.DeleteFunc(slices.Clone(all), func(m *api.Machine) bool { return m.Spec.Claim != "" })
	slices.SortFunc(machines, func(a, b *api.Machine) int { return cmp.Compare(a.Spec.Ordinal, b.Spec.Ordinal) })
	p.waits = nil

	valid := p.validate(pool)
	setCond(&st, api.Condition{Type: api.CondValid, Status: valid == "", Reason: reason(valid, "Invalid"), Message: valid}, p.in.Now)
	count := pool.Spec.Count
	if valid != "" {
		// Nothing is created, resized or removed for a spec that cannot be
		// satisfied: keep what exists.
		count = -1
	}
	have := map[int]bool{}
	for _, m := range machines {
		have[m.Spec.Ordinal] = true
		switch {
		case count < 0:
		case m.Spec.Ordinal >= count:
			p.surplus(m)
		case m.Spec.Deleting:
			p.surplus(m) // finish a deletion started before a scale-up
		case m.Spec.Host == "":
			p.place(m, pool, false)
		default:
			p.resize(m, pool.Spec.Template, hostByName[m.Spec.Host])
		}
	}
	for i := 0; i < count; i++ {
		if have[i] {
			continue
		}
		m := api.NewMachine(MachineName(name, i))
		m.Metadata.CreatedAt = p.in.Now
		m.Spec = api.MachineSpec{Kind: api.MachineLibvirt, Pool: name, Ordinal: i, Template: cloneTemplate(pool.Spec.Template)}
		p.place(m, pool, true)
	}
	st.Claimed = p.claims(pool, valid == "")

	st.Machines, st.Running, st.Pending = 0, 0, 0
	for _, m := range all {
		st.Machines++
		switch {
		case m.Status.Phase == api.MachineRunning:
			st.Running++
		case m.Spec.Host == "":
			st.Pending++
		}
	}
	// Failures on the hosts (a domain that could not be defined) show on
	// the pool too.
	var failing []string
	for _, m := range all {
		if c := api.FindCondition(m.Status.Conditions, api.CondProvisioned); c != nil && !c.Status && c.Reason != "NotDefined" {
			failing = append(failing, fmt.Sprintf("%s on %s: %s", m.Metadata.Name, m.Spec.Host, c.Message))
		}
	}
	if len(failing) > 0 {
		setCond(&st, api.Condition{Type: api.CondProvisioned, Status: false, Reason: "DomainFailed", Message: strings.Join(failing, "; ")}, p.in.Now)
	} else if api.FindCondition(st.Conditions, api.CondProvisioned) != nil {
		setCond(&st, api.Condition{Type: api.CondProvisioned, Status: true, Reason: "AllDefined"}, p.in.Now)
	}
	ready := count >= 0 && st.Running == count+st.Claimed && st.Machines == count+st.Claimed
	msg := fmt.Sprintf("%d of %d machines running", st.Running, pool.Spec.Count+st.Claimed)
	setCond(&st, api.Condition{Type: api.CondReady, Status: ready, Reason: reason(boolMsg(!ready, msg), "NotReady"), Message: msg}, p.in.Now)
	if len(p.waits) > 0 {
		setCond(&st, api.Condition{Type: api.CondScaleDown, Status: false, Reason: "Waiting", Message: strings.Join(p.waits, "; ")}, p.in.Now)
	} else if api.FindCondition(st.Conditions, api.CondScaleDown) != nil {
		setCond(&st, api.Condition{Type: api.CondScaleDown, Status: true, Reason: "Done"}, p.in.Now)
	}
	if !statusEqual(st, pool.Status) {
		np := *pool
		st.UpdatedAt = p.in.Now
		np.Status = st
		p.out.Pools = append(p.out.Pools, &np)
	}
}

// validate returns what makes the pool's spec unsatisfiable, or "".
func (p *planner) validate(pool *api.MachinePool) string {
	t := pool.Spec.Template
	var bad []string
	if pool.Spec.Count < 0 {
		bad = append(bad, fmt.Sprintf("count %d: want 0 or more", pool.Spec.Count))
	}
	if t.VCPUs <= 0 {
		bad = append(bad, fmt.Sprintf("template.vcpus %d: want 1 or more", t.VCPUs))
	}
	if t.MemoryMiB <= 0 {
		bad = append(bad, fmt.Sprintf("template.memoryMiB %d: want 1 or more", t.MemoryMiB))
	}
	if t.DiskGiB <= 0 {
		bad = append(bad, fmt.Sprintf("template.diskGiB %d: want 1 or more", t.DiskGiB))
	}
	if t.BaseImage == "" {
		bad = append(bad, "template.baseImage is empty: want a volume name")
	}
	if t.Network == "" {
		bad = append(bad, "template.network is empty: want a libvirt network name")
	}
	if b := t.Boot; b != nil {
		for _, f := range [][2]string{{"kernel", b.Kernel}, {"initrd", b.Initrd}} {
			if (f[0] == "kernel" || f[1] != "") && !strings.HasPrefix(f[1], "/") {
				bad = append(bad, fmt.Sprintf("template.boot.%s %q: want an absolute path on the hypervisor host", f[0], f[1]))
			}
		}
	}
	if len(bad) > 0 {
		return strings.Join(bad, "; ")
	}
	var eligible, why []string
	for _, h := range p.hosts {
		if !h.matches(pool.Spec.HostSelector) {
			continue
		}
		eligible = append(eligible, h.Name)
		if w := h.offers(t); w != "" {
			why = append(why, h.Name+": "+w)
		}
	}
	switch {
	case len(eligible) == 0 && len(pool.Spec.HostSelector) > 0:
		return fmt.Sprintf("no hypervisor host matches hostSelector %v", pool.Spec.HostSelector)
	case len(eligible) == 0:
		return "no hypervisor host is registered"
	case len(why) == len(eligible):
		return "no host can ever run this template: " + strings.Join(why, "; ")
	}
	return ""
}

// place finds a host for m; a machine that fits nowhere stays Pending with
// a Scheduled=false condition naming what each host lacks.
func (p *planner) place(m *api.Machine, pool *api.MachinePool, isNew bool) {
	p.placeBy(m, pool, isNew, func(a, b *Host) bool { return better(a, b, pool) })
}

// placeBy is place with the host order given: better(a, b) tells whether
// a beats b. It returns the host chosen, nil when none has room.
func (p *planner) placeBy(m *api.Machine, pool *api.MachinePool, isNew bool, better func(a, b *Host) bool) *Host {
	t := m.Spec.Template
	var best *Host
	var why []string
	for _, h := range p.hosts {
		if !h.matches(pool.Spec.HostSelector) {
			continue
		}
		if w := h.lacks(t); w != "" {
			why = append(why, h.Name+": "+w)
			continue
		}
		if best == nil || better(h, best) {
			best = h
		}
	}
	nm := *m
	nm.Status.Conditions = slices.Clone(m.Status.Conditions)
	if best != nil {
		nm.Spec.Host = best.Name
		nm.Status.Phase = api.MachineProvisioning
		nm.Status.Conditions, _ = api.SetCondition(nm.Status.Conditions, api.Condition{Type: api.CondScheduled, Status: true, Reason: "Placed", Message: "placed on " + best.Name, Since: p.in.Now})
		best.used.add(t, 1)
		best.perPool[pool.Metadata.Name]++
	} else {
		nm.Status.Phase = api.MachinePending
		nm.Status.Conditions, _ = api.SetCondition(nm.Status.Conditions, api.Condition{Type: api.CondScheduled, Status: false, Reason: "InsufficientResources", Message: "no host has room: " + strings.Join(why, "; "), Since: p.in.Now})
	}
	switch {
	case isNew:
		p.out.Create = append(p.out.Create, &nm)
	case nm.Spec.Host != "" || !conditionsEqual(nm.Status.Conditions, m.Status.Conditions) || nm.Status.Phase != m.Status.Phase:
		p.out.Update = append(p.out.Update, &nm)
	}
	return best
}

// better tells whether a is a better host than b for the pool: with
// spread, fewer of the pool's machines first; then more free memory; the
// name breaks ties (hosts are sorted, so b wins a tie).
func better(a, b *Host, pool *api.MachinePool) bool {
	if pool.Spec.Spread {
		if x, y := a.perPool[pool.Metadata.Name], b.perPool[pool.Metadata.Name]; x != y {
			return x < y
		}
		return a.freeMem() > b.freeMem()
	}
	return false // pack: the first host by name with room
}

// resize brings a placed machine's template to want (its pool's, or its
// claim's), when its host has room for the difference.
func (p *planner) resize(m *api.Machine, want api.MachineTemplate, h *Host) {
	if templateEqual(m.Spec.Template, want) {
		return
	}
	nm := *m
	nm.Status.Conditions = slices.Clone(m.Status.Conditions)
	if h != nil {
		h.used.add(m.Spec.Template, -1)
		if w := h.lacksRoom(want); w != "" {
			h.used.add(m.Spec.Template, 1)
			c := api.Condition{Type: api.CondScheduled, Status: true, Reason: "ResizePending", Message: fmt.Sprintf("placed on %s; cannot resize there: %s", h.Name, w), Since: p.in.Now}
			if nm.Status.Conditions, _ = api.SetCondition(nm.Status.Conditions, c); !conditionsEqual(nm.Status.Conditions, m.Status.Conditions) {
				p.out.Update = append(p.out.Update, &nm)
			}
			return
		}
		h.used.add(want, 1)
	}
	nm.Spec.Template = cloneTemplate(want)
	nm.Status.Conditions, _ = api.SetCondition(nm.Status.Conditions, api.Condition{Type: api.CondScheduled, Status: true, Reason: "Placed", Message: "placed on " + m.Spec.Host, Since: p.in.Now})
	p.out.Update = append(p.out.Update, &nm)
}

// surplus takes a machine away, its node first.
func (p *planner) surplus(m *api.Machine) {
	name := m.Metadata.Name
	switch {
	case m.Spec.Host == "":
		p.out.Delete = append(p.out.Delete, m)
		return
	case m.Spec.Deleting && m.Status.Phase == api.MachineDeleted:
		p.out.Delete = append(p.out.Delete, m)
		return
	case m.Spec.Deleting:
		p.waits = append(p.waits, fmt.Sprintf("%s: host %s is deleting the domain", name, m.Spec.Host))
		return
	}
	node := p.in.Nodes[name]
	r := p.in.Removals[name]
	if r != nil && node != nil && r.Metadata.CreatedAt.Before(node.Metadata.CreatedAt) {
		r = nil // a record from an earlier life of the name
	}
	switch {
	case node == nil || node.Status.Phase == api.NodeRemoved || (r != nil && r.Status.Phase == api.RemoveDone):
		nm := *m
		nm.Spec.Deleting = true
		nm.Status.Phase = api.MachineDeleting
		p.out.Update = append(p.out.Update, &nm)
		p.waits = append(p.waits, fmt.Sprintf("%s: node left; deleting the domain", name))
	case r == nil:
		p.out.RequestRemoval = append(p.out.RequestRemoval, name)
		p.waits = append(p.waits, fmt.Sprintf("%s: removal of its node requested", name))
	case r.Status.Phase == api.RemoveRefused || r.Status.Phase == api.RemoveFailed:
		p.waits = append(p.waits, fmt.Sprintf("%s: removal of its node %s: %s (file it again with nicoctl remove node)", name, strings.ToLower(string(r.Status.Phase)), r.Status.Message))
	default:
		p.waits = append(p.waits, fmt.Sprintf("%s: waiting for its node to leave the cluster", name))
	}
}

func setCond(st *api.MachinePoolStatus, c api.Condition, now time.Time) {
	c.Since = now
	st.Conditions, _ = api.SetCondition(st.Conditions, c)
}

func reason(msg, r string) string {
	if msg == "" {
		return ""
	}
	return r
}

func boolMsg(b bool, msg string) string {
	if b {
		return msg
	}
	return ""
}
