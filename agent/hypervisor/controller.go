package hypervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/hypervisor"
	"github.com/homystack/nico/pkg/store"
	"github.com/jonboulle/clockwork"
)

// Config is what a hypervisor host's controller needs.
type Config struct {
	// Node is this host's node name: machines placed on it have
	// spec.host == Node.
	Node   string
	Labels map[string]string
	// Endpoints, Seeds, Token and Prefix are handed to every new machine at
	// first boot, with its name and roles. With Seeds (gossip.seeds of the
	// mesh) and Token, a machine gets no Endpoints: it joins the mesh with
	// the token and learns the etcd endpoints there.
	Endpoints []string
	Seeds     []string
	Token     string
	Prefix    string
	// Resync is how often everything is re-read besides watch events.
	Resync time.Duration
	// StopGrace is how long a guest has to shut down before it is destroyed.
	StopGrace time.Duration
	// Retry returns the backoff of a machine whose domain action keeps
	// failing; nil: about 1 s doubling up to 5 minutes.
	Retry func() backoff.BackOff
	// DomainType is the type of the domains defined: DomainTypeAuto (also
	// when empty), DomainTypeKVM or DomainTypeQEMU.
	DomainType string
	// BootTimeout is how long a running domain may show no sign of booting
	// (console output, an address, its node registered) before its machine
	// reports Booted false, NotBooting; zero: 5 minutes.
	BootTimeout time.Duration
	// Clock is the controller's clock (Now, and the wake of a machine
	// held back); nil: the real clock.
	Clock clockwork.Clock
}

// Controller reconciles the libvirt domains of the machines
// placed on this host, reports the host's capacity (hypervisors/<node>) and
// each machine's domain state and addresses. It only ever touches domains
// that carry nico's metadata.
//
//	[watch machines/ or resync] --> read machines placed here, nodes, domains
//	        ^                               |
//	        |                     observeBoots: a sign of boot per running domain;
//	        |                     chooseDomainType (auto: kvm until a kvm guest does not boot)
//	        |                               |
//	        |                     planDomains: create, start, restart, delete
//	        |                               |
//	        +---- write status (CAS) <------+  (hypervisor unavailable: back off, retry)
type Controller struct {
	cfg Config
	st  *store.Store
	hv  hypervisor.Hypervisor
	log *slog.Logger
	// retries holds back machines whose actions keep failing.
	retries *machineRetries
	// boots is what each running domain showed of its boot, by UUID.
	boots map[string]*bootWatch
	// kvmFailure, in auto, says which kvm guest did not boot: this host's
	// domains are qemu from then on.
	kvmFailure string
	// domainType is the type new domains get, and domainTypeWhy why.
	domainType, domainTypeWhy string
	// Now is the clock; tests replace it.
	Now func() time.Time
	// OnPass, when set, is called after each pass with its actions and
	// error (tests and the benchmark observe passes through it).
	OnPass func(actions []domainAction, err error)

	clock clockwork.Clock // times the wake of a machine held back
	wake  chan struct{}   // wakes the controller (Controller)
	due   clockwork.Timer // wakes it when the first machine held back is due
}

// New returns a controller; it starts nothing until Run.
func New(cfg Config, st *store.Store, hv hypervisor.Hypervisor, log *slog.Logger) *Controller {
	if cfg.Resync <= 0 {
		cfg.Resync = 5 * time.Second
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 30 * time.Second
	}
	if cfg.Retry == nil {
		cfg.Retry = defaultMachineRetry
	}
	if cfg.DomainType == "" {
		cfg.DomainType = DomainTypeAuto
	}
	if cfg.BootTimeout <= 0 {
		cfg.BootTimeout = 5 * time.Minute
	}
	c := &Controller{cfg: cfg, st: st, hv: hv, log: log.With("component", "hypervisor", "node", cfg.Node),
		retries: newMachineRetries(cfg.Retry), boots: map[string]*bootWatch{}, Now: time.Now,
		clock: clockwork.NewRealClock(), wake: make(chan struct{}, 1)}
	if cfg.Clock != nil {
		c.clock, c.Now = cfg.Clock, cfg.Clock.Now
	}
	return c
}

// Controller is the controller of this host's domains (package
// controller): it watches machines/ (what is placed here) and nodes/ (a
// guest registering is a sign it booted), resyncs every Resync (libvirt
// has no watch), and wakes when a machine held back by its backoff is due.
// A failed pass (the hypervisor or the store unavailable) is retried with
// the runtime's backoff, and counts against the agent's health.
func (c *Controller) Controller() controller.Controller {
	return &controller.Func{ControllerName: "hypervisor", Prefixes: []string{store.MachinesDir, store.NodesDir}, Resync: c.cfg.Resync, Wake: c.wake, Do: c.reconcile}
}

// Run runs Controller on a runtime of its own until ctx ends, and returns
// nil (tests and benchmarks; the agent runs Controller on its own runtime).
func (c *Controller) Run(ctx context.Context) error {
	return controller.New(c.st.Client(), controller.WithLogger(c.log)).Run(ctx, c.Controller())
}

// reconcile runs a pass and, after one that succeeded, arms the wake of
// the first machine held back (a failed pass is the runtime's to retry).
func (c *Controller) reconcile(ctx context.Context) error {
	if _, err := c.Once(ctx); err != nil {
		return err
	}
	if c.due != nil {
		c.due.Stop()
		c.due = nil
	}
	if due, ok := c.retries.next(); ok {
		c.due = c.clock.AfterFunc(max(due.Sub(c.Now()), 0), func() {
			select {
			case c.wake <- struct{}{}:
			default: // a wake is pending
			}
		})
	}
	return nil
}

// Once runs one pass: report the host, plan and apply domain actions, and
// write the machines' status. It returns the actions it took: an action of
// a machine held back by its backoff (machineRetries) is not taken.
func (c *Controller) Once(ctx context.Context) (actions []domainAction, err error) {
	defer func() {
		if c.OnPass != nil {
			c.OnPass(actions, err)
		}
	}()
	host, err := c.hv.Host(ctx)
	if err != nil {
		return nil, fmt.Errorf("agent: hypervisor host: %w", err)
	}
	all, _, err := store.List[api.Machine](ctx, c.st, store.MachinesDir)
	if err != nil {
		return nil, err
	}
	var mine []*api.Machine
	for _, m := range all {
		if m.Spec.Kind == api.MachineLibvirt && m.Spec.Host == c.cfg.Node {
			mine = append(mine, m)
		}
	}
	domains, err := c.hv.Domains(ctx)
	if err != nil {
		return nil, fmt.Errorf("agent: list domains: %w", err)
	}
	registered, err := c.registeredNodes(ctx)
	if err != nil {
		return nil, err
	}
	now := c.Now()
	declared := map[string]bool{}
	for _, m := range mine {
		declared[m.Spec.UUID] = !m.Spec.Deleting
	}
	stuck, err := c.observeBoots(ctx, domains, declared, registered, now)
	if err != nil {
		return nil, err
	}
	// The type is chosen after the boots were seen: in auto, a kvm guest
	// that did not boot makes it qemu, for its own redefinition too.
	if typ, why := chooseDomainType(c.cfg.DomainType, host.DomainTypes, c.kvmFailure); typ != c.domainType || why != c.domainTypeWhy {
		c.domainType, c.domainTypeWhy = typ, why
		c.log.Info("domain type chosen", "domainType", typ, "setting", c.cfg.DomainType, "offered", host.DomainTypes, "why", why)
	}
	if err := c.report(ctx, host); err != nil {
		return nil, err
	}
	planned := planDomains(mine, domains, c.spec, stuck)
	failed := map[string]error{}
	pending := map[string]bool{}
	for _, a := range planned {
		pending[a.UUID] = true
		sig := actionSig(a)
		if ok, last := c.retries.due(a.UUID, sig, now); !ok {
			failed[a.UUID] = last // held back by its backoff
			continue
		}
		actions = append(actions, a)
		if err := c.apply(ctx, a); err != nil {
			if errors.Is(err, hypervisor.ErrUnavailable) || ctx.Err() != nil {
				return actions, err
			}
			failed[a.UUID] = err
			delay := c.retries.failed(a.UUID, sig, err, now)
			c.log.Warn("domain action failed; retrying later", "action", string(a.Kind), "uuid", a.UUID, "machine", machineName(a), "err", err, "retryIn", delay)
			continue
		}
		c.retries.succeeded(a.UUID)
		if a.Kind != actDelete {
			c.bootStarted(a, now)
		}
	}
	c.retries.keepOnly(pending)
	if len(actions) > 0 {
		if domains, err = c.hv.Domains(ctx); err != nil {
			return actions, fmt.Errorf("agent: list domains: %w", err)
		}
	}
	return actions, c.writeStatus(ctx, mine, domains, failed, registered)
}

// registeredNodes tells which nodes are registered (not removed), by name.
func (c *Controller) registeredNodes(ctx context.Context) (map[string]bool, error) {
	nodes, _, err := store.List[api.Node](ctx, c.st, store.NodesDir)
	if err != nil {
		return nil, err
	}
	registered := map[string]bool{}
	for _, n := range nodes {
		registered[n.Metadata.Name] = n.Status.Phase != api.NodeRemoved
	}
	return registered, nil
}

func machineName(a domainAction) string {
	if a.Machine != nil {
		return a.Machine.Metadata.Name
	}
	return a.Spec.Name
}

func (c *Controller) apply(ctx context.Context, a domainAction) error {
	log := c.log.With("machine", machineName(a), "uuid", a.UUID)
	switch a.Kind {
	case actCreate:
		if err := c.hv.Define(ctx, a.Spec); err != nil {
			return err
		}
		log.Info("domain defined; starting", "changed", a.Why)
		return c.hv.Start(ctx, a.UUID)
	case actStart:
		log.Info("starting stopped domain")
		return c.hv.Start(ctx, a.UUID)
	case actRestart:
		log.Info("restarting domain to apply changes", "changed", a.Why)
		grace := c.cfg.StopGrace
		if slices.Contains(a.Why, whyDomainType) {
			grace = 0 // a guest that did not boot cannot shut down
		}
		if err := c.hv.Stop(ctx, a.UUID, grace); err != nil {
			return err
		}
		if err := c.hv.Define(ctx, a.Spec); err != nil {
			return err
		}
		return c.hv.Start(ctx, a.UUID)
	case actDelete:
		if a.Machine == nil {
			log.Info("removing nico domain that no machine declares")
		} else {
			log.Info("deleting domain")
		}
		if err := c.hv.Stop(ctx, a.UUID, c.cfg.StopGrace); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
			return err
		}
		if err := c.hv.Undefine(ctx, a.UUID); err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
			return err
		}
		return nil
	}
	return fmt.Errorf("agent: unknown domain action %q", a.Kind)
}

// spec is the domain a machine asks for, with its first-boot identity.
func (c *Controller) spec(m *api.Machine) hypervisor.DomainSpec {
	t := m.Spec.Template
	roles := []string{string(api.RoleWorker)}
	if len(t.Roles) > 0 {
		roles = roles[:0]
		for _, r := range t.Roles {
			roles = append(roles, string(r))
		}
	}
	id := hypervisor.Identity{Name: m.Metadata.Name, Endpoints: c.cfg.Endpoints, Roles: roles,
		Seeds: c.cfg.Seeds, Token: c.cfg.Token, Prefix: c.cfg.Prefix}
	if len(id.Seeds) > 0 && id.Token != "" {
		// With the mesh's seeds and the token the machine learns the etcd
		// endpoints from gossip, proving the token on the way.
		id.Endpoints = nil
	}
	s := hypervisor.DomainSpec{
		UUID: m.Spec.UUID, Name: m.Metadata.Name, Pool: m.Spec.Pool,
		VCPUs: t.VCPUs, MemoryMiB: t.MemoryMiB, DiskGiB: t.DiskGiB,
		StoragePool: t.StoragePoolName(), BaseImage: t.BaseImage, Network: t.Network,
		MAC: hypervisor.MAC(m.Metadata.Name), Identity: id, Type: c.domainType,
	}
	if b := t.Boot; b != nil {
		s.Kernel, s.Initrd, s.Cmdline = b.Kernel, b.Initrd, b.Cmdline
	}
	return s
}

// report writes the host's capacity when it changed.
func (c *Controller) report(ctx context.Context, h hypervisor.Host) error {
	hv := api.NewHypervisor(c.cfg.Node)
	old := api.NewHypervisor(c.cfg.Node)
	err := c.st.Get(ctx, store.HypervisorKey(c.cfg.Node), old)
	switch {
	case errors.Is(err, store.ErrNotFound):
		hv.Metadata.CreatedAt = c.Now()
	case err != nil:
		return err
	default:
		hv.Metadata = old.Metadata
	}
	hv.Spec.Labels = c.cfg.Labels
	hv.Status = api.HypervisorStatus{VCPUs: h.VCPUs, MemoryMiB: h.MemoryMiB, DiskGiB: h.DiskGiB, Networks: h.Networks, Images: h.Images,
		DomainType: c.domainType, DomainTypeReason: c.domainTypeWhy, UpdatedAt: c.Now()}
	if err == nil && maps.Equal(old.Spec.Labels, hv.Spec.Labels) && sameReport(old.Status, hv.Status) {
		return nil
	}
	if err := c.st.Put(ctx, store.HypervisorKey(c.cfg.Node), hv); err != nil {
		return fmt.Errorf("agent: report hypervisor: %w", err)
	}
	return nil
}

func sameReport(a, b api.HypervisorStatus) bool {
	return a.VCPUs == b.VCPUs && a.MemoryMiB == b.MemoryMiB && maps.Equal(a.DiskGiB, b.DiskGiB) &&
		slices.Equal(a.Networks, b.Networks) && slices.Equal(a.Images, b.Images) && a.Message == b.Message &&
		a.DomainType == b.DomainType && a.DomainTypeReason == b.DomainTypeReason
}

// HasRole tells whether roles hold the hypervisor role.
func HasRole(roles []api.Role) bool { return slices.Contains(roles, api.RoleHypervisor) }
