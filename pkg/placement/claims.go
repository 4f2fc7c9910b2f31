package placement

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/homystack/nico/pkg/api"
)

// A MachineClaim lists, by name, the machines a declared cluster wants
// from a pool (package machineclaim plans it). The planner creates the
// listed machines it lacks, places them so that the claim's voters are
// spread over hypervisor hosts and topology domains (its spreadWith nodes
// counted), and takes away, through the same safe path as a pool's
// surplus (the node's removal first, then the domain and its disk), a
// claimed machine its claim no longer lists or a machine of a claim that
// is gone. Only a claim's own machines are ever taken away for it.
//
//	listed, absent --> Create (placed: the host whose domain holds the fewest of the claim's voters)
//	listed, Pending --> placed when a host has room
//	not listed / claim gone --> surplus (RequestRemoval --> Deleting --> Deleted --> object deleted)

// claims plans the claims that draw from pool and returns how many
// machines they list. valid is false when the pool's spec cannot be
// satisfied: nothing is then created, placed or resized for them.
func (p *planner) claims(pool *api.MachinePool, valid bool) int {
	n := 0
	for _, c := range p.sortedClaims() {
		if c.Spec.Pool != pool.Metadata.Name {
			continue
		}
		n += len(c.Spec.Machines)
		reason := ""
		if !valid {
			reason = "pool " + pool.Metadata.Name + " is not valid: see its Valid condition"
		}
		p.claim(c, pool, reason)
	}
	return n
}

// claimsOfNoPool takes away the machines of claims that are gone, and
// reports claims whose pool does not exist.
func (p *planner) claimsOfNoPool() {
	known := p.known
	byName := map[string]*api.MachineClaim{}
	for _, c := range p.sortedClaims() {
		byName[c.Metadata.Name] = c
		if !known[c.Spec.Pool] {
			p.claim(c, nil, fmt.Sprintf("no MachinePool named %q", c.Spec.Pool))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.byClaim)) {
		if byName[name] != nil {
			continue
		}
		for _, m := range p.byClaim[name] {
			if known[m.Spec.Pool] { // an unknown pool's machines are surplus already
				p.surplus(m)
			}
		}
	}
}

func (p *planner) sortedClaims() []*api.MachineClaim {
	cs := slices.Clone(p.in.Claims)
	slices.SortFunc(cs, func(a, b *api.MachineClaim) int { return cmp.Compare(a.Metadata.Name, b.Metadata.Name) })
	return cs
}

// claim plans one claim. pool is nil, or blocked says why, when nothing
// can be created or placed for it.
func (p *planner) claim(c *api.MachineClaim, pool *api.MachinePool, blocked string) {
	listed := map[string]bool{}
	for _, name := range c.Spec.Machines {
		listed[name] = true
	}
	mine := slices.Clone(p.byClaim[c.Metadata.Name])
	slices.SortFunc(mine, func(a, b *api.Machine) int { return cmp.Compare(a.Metadata.Name, b.Metadata.Name) })
	// domains counts the claim's voters in each failure domain: its
	// spreadWith nodes and its listed machines placed so far.
	domains := map[string]int{}
	for _, n := range c.Spec.SpreadWith {
		domains[p.nodeDomain(n)]++
	}
	for _, m := range mine {
		if listed[m.Metadata.Name] && m.Spec.Host != "" && !m.Spec.Deleting {
			domains[p.hostDomain(m.Spec.Host)]++
		}
	}
	// A claim's machine goes to the host whose domain holds the fewest of
	// its voters, then the one with the most free memory (hosts are
	// sorted by name: the first wins a tie).
	rank := func(a, b *Host) bool {
		if x, y := domains[p.hostDomain(a.Name)], domains[p.hostDomain(b.Name)]; x != y {
			return x < y
		}
		return a.freeMem() > b.freeMem()
	}
	placed := func(h *Host) {
		if h != nil {
			domains[p.hostDomain(h.Name)]++
		}
	}
	var want api.MachineTemplate
	if pool != nil {
		want = claimTemplate(pool.Spec.Template, c)
	}
	have := map[string]*api.Machine{}
	for _, m := range mine {
		have[m.Metadata.Name] = m
		switch {
		case !p.known[m.Spec.Pool]:
			// its pool is gone: surplus with the pool's other machines
		case !listed[m.Metadata.Name] || m.Spec.Deleting:
			p.surplus(m)
		case blocked != "" || m.Spec.Pool != pool.Metadata.Name:
			// kept as it is: its pool cannot be planned, or the claim
			// moved to another pool (the machine stays until the claim
			// drops it)
		case m.Spec.Host == "":
			placed(p.placeBy(m, pool, false, rank))
		default:
			p.resize(m, want, p.hostByName[m.Spec.Host])
		}
	}
	var created []*api.Machine
	if blocked == "" {
		for _, name := range c.Spec.Machines {
			if have[name] != nil {
				continue
			}
			m := api.NewMachine(name)
			m.Metadata.CreatedAt = p.in.Now
			m.Spec = api.MachineSpec{Kind: api.MachineLibvirt, Pool: pool.Metadata.Name, Claim: c.Metadata.Name, Template: cloneTemplate(want)}
			placed(p.placeBy(m, pool, true, rank))
			created = append(created, p.out.Create[len(p.out.Create)-1])
		}
	}
	p.claimStatus(c, append(mine, created...), listed, domains, blocked)
}

// claimTemplate is the pool's template with the claim's roles.
func claimTemplate(t api.MachineTemplate, c *api.MachineClaim) api.MachineTemplate {
	t = cloneTemplate(t)
	if len(c.Spec.Roles) > 0 {
		t.Roles = slices.Clone(c.Spec.Roles)
	}
	return t
}

// claimStatus writes where the claim's machines are, and whether losing
// one failure domain would lose quorum.
func (p *planner) claimStatus(c *api.MachineClaim, ms []*api.Machine, listed map[string]bool, domains map[string]int, blocked string) {
	st := c.Status
	st.Conditions = slices.Clone(c.Status.Conditions)
	st.Machines = nil
	seen := map[string]bool{}
	var pending []string
	for _, m := range ms {
		seen[m.Metadata.Name] = true
		cm := api.ClaimedMachine{Name: m.Metadata.Name, Host: m.Spec.Host, Phase: m.Status.Phase, Released: !listed[m.Metadata.Name]}
		// Creates and updates in this pass carry their new host and phase.
		if nm := p.planned(m.Metadata.Name); nm != nil {
			cm.Host, cm.Phase, cm.Released = nm.Spec.Host, nm.Status.Phase, cm.Released || nm.Spec.Deleting
		}
		if cm.Host != "" {
			cm.Domain = p.hostDomain(cm.Host)
		} else if !cm.Released {
			pending = append(pending, cm.Name)
		}
		st.Machines = append(st.Machines, cm)
	}
	for _, name := range c.Spec.Machines {
		if !seen[name] {
			st.Machines = append(st.Machines, api.ClaimedMachine{Name: name, Phase: api.MachinePending})
			pending = append(pending, name)
		}
	}
	slices.SortFunc(st.Machines, func(a, b api.ClaimedMachine) int { return cmp.Compare(a.Name, b.Name) })
	switch {
	case blocked != "":
		setClaimCond(&st, api.Condition{Type: api.CondScheduled, Status: false, Reason: "PoolUnavailable", Message: blocked}, p)
	case len(pending) > 0:
		slices.Sort(pending)
		setClaimCond(&st, api.Condition{Type: api.CondScheduled, Status: false, Reason: "Pending",
			Message: "no host has room for " + strings.Join(pending, ", ") + " (see each machine's Scheduled condition)"}, p)
	default:
		setClaimCond(&st, api.Condition{Type: api.CondScheduled, Status: true, Reason: "Placed"}, p)
	}
	if total := len(c.Spec.Machines) + len(c.Spec.SpreadWith); c.Spec.Quorum && total >= 3 {
		setClaimCond(&st, spreadCondition(domains, total), p)
	}
	if !claimStatusEqual(st, c.Status) {
		nc := *c
		st.UpdatedAt = p.in.Now
		nc.Status = st
		p.out.Claims = append(p.out.Claims, &nc)
	}
}

// spreadCondition says whether losing the failure domain holding the
// most voters keeps quorum: with total voters, a domain may hold at most
// total - (total/2+1).
func spreadCondition(domains map[string]int, total int) api.Condition {
	worst, k := "", 0
	for _, d := range slices.Sorted(maps.Keys(domains)) {
		if domains[d] > k {
			worst, k = d, domains[d]
		}
	}
	quorum := total/2 + 1
	if total-k < quorum {
		return api.Condition{Type: api.CondSpread, Status: false, Reason: "QuorumAtRisk",
			Message: fmt.Sprintf("losing %s would lose %d of %d voters (quorum %d): add a hypervisor host or topology domain", worst, k, total, quorum)}
	}
	return api.Condition{Type: api.CondSpread, Status: true, Reason: "Spread",
		Message: fmt.Sprintf("%d voters over %d failure domains, at most %d in one: losing any one keeps quorum", total, len(domains), k)}
}

// planned returns the machine name as this pass creates or updates it.
func (p *planner) planned(name string) *api.Machine {
	for _, list := range [][]*api.Machine{p.out.Create, p.out.Update} {
		for _, m := range list {
			if m.Metadata.Name == name {
				return m
			}
		}
	}
	return nil
}

// hostDomain is a hypervisor host's failure domain: its topology label,
// else the host itself.
func (p *planner) hostDomain(host string) string {
	if h := p.hostByName[host]; h != nil && h.Labels[api.LabelTopology] != "" {
		return h.Labels[api.LabelTopology]
	}
	return host
}

// nodeDomain is a node's failure domain: a machine's, its host's; a
// hypervisor host's, its own; else the node's topology label, or the node.
func (p *planner) nodeDomain(node string) string {
	for _, m := range p.in.Machines {
		if m.Metadata.Name == node && m.Spec.Host != "" {
			return p.hostDomain(m.Spec.Host)
		}
	}
	if p.hostByName[node] != nil {
		return p.hostDomain(node)
	}
	if n := p.in.Nodes[node]; n != nil && n.Spec.Labels[api.LabelTopology] != "" {
		return n.Spec.Labels[api.LabelTopology]
	}
	return node
}

func setClaimCond(st *api.MachineClaimStatus, c api.Condition, p *planner) {
	c.Since = p.in.Now
	st.Conditions, _ = api.SetCondition(st.Conditions, c)
}

func claimStatusEqual(a, b api.MachineClaimStatus) bool {
	return slices.Equal(a.Machines, b.Machines) && conditionsEqual(a.Conditions, b.Conditions)
}
