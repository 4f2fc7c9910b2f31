// Package hypervisortest has a memory fake of hypervisor.Hypervisor and the
// contract test that the fake and the real implementation both pass.
package hypervisortest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/hypervisor"
)

// Fake is a hypervisor in memory, with a "default" network and a "default"
// storage pool holding the image "base.qcow2", and error injection.
type Fake struct {
	mu      sync.Mutex
	host    hypervisor.Host
	domains map[string]*fakeDomain // by UUID
	foreign map[string]string      // name -> UUID
	fail    map[string]error
	calls   map[string]int
}

type fakeDomain struct {
	spec  hypervisor.DomainSpec
	state hypervisor.State
	// console counts the bytes the guest wrote since it last started.
	console int64
}

// NewFake returns a fake host with the given capacity.
func NewFake(vcpus, memMiB int) *Fake {
	return &Fake{
		host: hypervisor.Host{VCPUs: vcpus, MemoryMiB: memMiB, DiskGiB: map[string]int{"default": 100},
			Networks: []string{"default"}, Images: []string{"default/base.qcow2"},
			DomainTypes: []string{hypervisor.TypeKVM, hypervisor.TypeQEMU}},
		domains: map[string]*fakeDomain{}, foreign: map[string]string{}, fail: map[string]error{}, calls: map[string]int{},
	}
}

// SetDomainTypes sets the domain types the host offers (kvm and qemu by
// default).
func (f *Fake) SetDomainTypes(types ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.host.DomainTypes = slices.Clone(types)
}

// WriteConsole makes the running domain uuid write n bytes to its serial
// console, as a booting guest does; it tells whether the domain runs.
func (f *Fake) WriteConsole(uuid string, n int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.domains[uuid]
	if d == nil || d.state != hypervisor.Running {
		return false
	}
	d.console += n
	return true
}

// FailNext makes the next call of method (Host, Domains, Define, Start,
// Stop, Undefine, ConsoleBytes) return err.
func (f *Fake) FailNext(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[method] = err
}

// Calls counts the successful calls of method.
func (f *Fake) Calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// AddForeign adds a domain that is not nico's and returns its UUID.
func (f *Fake) AddForeign(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	uuid := fmt.Sprintf("f0000000-0000-4000-8000-%012d", len(f.foreign)+1)
	f.foreign[name] = uuid
	return uuid
}

// ForeignNames lists the foreign domains, which must never disappear.
func (f *Fake) ForeignNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.foreign))
}

func (f *Fake) enter(method string) error {
	if err := f.fail[method]; err != nil {
		delete(f.fail, method)
		return err
	}
	f.calls[method]++
	return nil
}

// Host implements hypervisor.Hypervisor.
func (f *Fake) Host(ctx context.Context) (hypervisor.Host, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Host"); err != nil {
		return hypervisor.Host{}, err
	}
	h := f.host
	h.DiskGiB = maps.Clone(h.DiskGiB)
	h.DomainTypes = slices.Clone(h.DomainTypes)
	return h, nil
}

// Domains implements hypervisor.Hypervisor.
func (f *Fake) Domains(ctx context.Context) ([]hypervisor.Domain, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Domains"); err != nil {
		return nil, err
	}
	var out []hypervisor.Domain
	for _, d := range f.domains {
		s := d.spec
		s.Identity = hypervisor.Identity{}
		out = append(out, hypervisor.Domain{Spec: s, State: d.state})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Name < out[j].Spec.Name })
	return out, nil
}

// Define implements hypervisor.Hypervisor.
func (f *Fake) Define(ctx context.Context, spec hypervisor.DomainSpec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Define"); err != nil {
		return err
	}
	switch {
	case spec.StoragePool != "default":
		return fmt.Errorf("%w: %q", hypervisor.ErrNoStoragePool, spec.StoragePool)
	case !slices.Contains(f.host.Images, spec.StoragePool+"/"+spec.BaseImage):
		return fmt.Errorf("%w: %q in pool %q", hypervisor.ErrNoImage, spec.BaseImage, spec.StoragePool)
	case !slices.Contains(f.host.Networks, spec.Network):
		return fmt.Errorf("%w: %q", hypervisor.ErrNoNetwork, spec.Network)
	case spec.Type != "" && !slices.Contains(f.host.DomainTypes, spec.Type):
		return fmt.Errorf("%w: domain type %q (the host offers %v)", hypervisor.ErrUnsupported, spec.Type, f.host.DomainTypes)
	}
	if _, ok := f.foreign[spec.Name]; ok {
		return fmt.Errorf("%w: %q is not nico's", hypervisor.ErrNameTaken, spec.Name)
	}
	for uuid, d := range f.domains {
		if d.spec.Name == spec.Name && uuid != spec.UUID {
			return fmt.Errorf("%w: %q has UUID %s", hypervisor.ErrNameTaken, spec.Name, uuid)
		}
	}
	if spec.Type == "" && len(f.host.DomainTypes) > 0 {
		spec.Type = f.host.DomainTypes[0] // the fake's default: the first offered
	}
	d := f.domains[spec.UUID]
	if d == nil {
		d = &fakeDomain{state: hypervisor.Shutoff}
		f.domains[spec.UUID] = d
	} else if d.spec.DiskGiB > spec.DiskGiB {
		spec.DiskGiB = d.spec.DiskGiB // volumes never shrink
	}
	d.spec = spec
	return nil
}

// Start implements hypervisor.Hypervisor.
func (f *Fake) Start(ctx context.Context, uuid string) error {
	return f.setState("Start", uuid, hypervisor.Running)
}

// Stop implements hypervisor.Hypervisor.
func (f *Fake) Stop(ctx context.Context, uuid string, grace time.Duration) error {
	return f.setState("Stop", uuid, hypervisor.Shutoff)
}

func (f *Fake) setState(method, uuid string, s hypervisor.State) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter(method); err != nil {
		return err
	}
	d := f.domains[uuid]
	if d == nil {
		return fmt.Errorf("%w: %s", hypervisor.ErrNotFound, uuid)
	}
	if d.state != s {
		d.console = 0 // a new run: its console starts empty
	}
	d.state = s
	return nil
}

// ConsoleBytes implements hypervisor.Hypervisor: what WriteConsole wrote
// since the domain last started.
func (f *Fake) ConsoleBytes(ctx context.Context, uuid string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("ConsoleBytes"); err != nil {
		return 0, err
	}
	d := f.domains[uuid]
	if d == nil {
		return 0, fmt.Errorf("%w: %s", hypervisor.ErrNotFound, uuid)
	}
	if d.state != hypervisor.Running {
		return 0, nil
	}
	return d.console, nil
}

// Undefine implements hypervisor.Hypervisor.
func (f *Fake) Undefine(ctx context.Context, uuid string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("Undefine"); err != nil {
		return err
	}
	if f.domains[uuid] == nil {
		return fmt.Errorf("%w: %s", hypervisor.ErrNotFound, uuid)
	}
	delete(f.domains, uuid)
	return nil
}

var _ hypervisor.Hypervisor = (*Fake)(nil)
