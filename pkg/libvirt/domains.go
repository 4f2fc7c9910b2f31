//go:build cgo

package libvirt

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/hypervisor"
	"libvirt.org/go/libvirt"
)

// Domains implements hypervisor.Hypervisor. The owned fields are read from
// the persistent definition, so that a redefinition shows at once; the
// disk size from the overlay volume; addresses from the network's DHCP
// leases, else from the guest agent.
func (h *Hypervisor) Domains(ctx context.Context) ([]hypervisor.Domain, error) {
	c, err := h.connect()
	if err != nil {
		return nil, err
	}
	doms, err := c.ListAllDomains(0)
	if err != nil {
		return nil, h.check(err, "list domains")
	}
	defer freeAll(doms)
	var out []hypervisor.Domain
	for i := range doms {
		d := &doms[i]
		doc, err := d.GetXMLDesc(libvirt.DOMAIN_XML_INACTIVE)
		if err != nil {
			if isCode(err, libvirt.ERR_NO_DOMAIN) {
				continue // gone since the list
			}
			return nil, h.check(err, "domain XML")
		}
		p, err := parseDomain(doc)
		if err != nil {
			return nil, err
		}
		if !p.owned {
			continue
		}
		dom := hypervisor.Domain{Spec: p.spec, State: h.state(d)}
		dom.Spec.DiskGiB = h.volumeGiB(c, p.meta.StoragePool, p.meta.Volume)
		if dom.State == hypervisor.Running {
			dom.Addresses = addresses(d)
		}
		out = append(out, dom)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Name < out[j].Spec.Name })
	return out, nil
}

func (h *Hypervisor) state(d *libvirt.Domain) hypervisor.State {
	s, _, err := d.GetState()
	if err != nil {
		return hypervisor.Other
	}
	switch s {
	case libvirt.DOMAIN_RUNNING, libvirt.DOMAIN_BLOCKED:
		return hypervisor.Running
	case libvirt.DOMAIN_SHUTOFF:
		return hypervisor.Shutoff
	case libvirt.DOMAIN_PAUSED, libvirt.DOMAIN_PMSUSPENDED:
		return hypervisor.Paused
	case libvirt.DOMAIN_SHUTDOWN:
		return hypervisor.Shutdown
	case libvirt.DOMAIN_CRASHED:
		return hypervisor.Crashed
	}
	return hypervisor.Other
}

func (h *Hypervisor) volumeGiB(c *libvirt.Connect, pool, vol string) int {
	p, err := c.LookupStoragePoolByName(pool)
	if err != nil {
		return 0
	}
	defer p.Free()
	v, err := p.LookupStorageVolByName(vol)
	if err != nil {
		return 0
	}
	defer v.Free()
	info, err := v.GetInfo()
	if err != nil {
		return 0
	}
	return int(info.Capacity >> 30)
}

func addresses(d *libvirt.Domain) []string {
	var out []string
	for _, src := range []libvirt.DomainInterfaceAddressesSource{libvirt.DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE, libvirt.DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT} {
		ifs, err := d.ListAllInterfaceAddresses(src)
		if err != nil {
			continue
		}
		for _, i := range ifs {
			if i.Name == "lo" {
				continue
			}
			for _, a := range i.Addrs {
				out = append(out, a.Addr)
			}
		}
		if len(out) > 0 {
			break
		}
	}
	sort.Strings(out)
	return out
}

// lookup finds nico's domain uuid; a foreign domain is not found.
func (h *Hypervisor) lookup(c *libvirt.Connect, uuid string) (*libvirt.Domain, parsed, error) {
	d, err := c.LookupDomainByUUIDString(uuid)
	if err != nil {
		if isCode(err, libvirt.ERR_NO_DOMAIN) {
			return nil, parsed{}, fmt.Errorf("%w: %s", hypervisor.ErrNotFound, uuid)
		}
		return nil, parsed{}, h.check(err, "look up domain %s", uuid)
	}
	doc, err := d.GetXMLDesc(libvirt.DOMAIN_XML_INACTIVE)
	if err != nil {
		d.Free()
		return nil, parsed{}, h.check(err, "domain %s XML", uuid)
	}
	p, err := parseDomain(doc)
	if err == nil && !p.owned {
		err = fmt.Errorf("%w: %s is not nico's", hypervisor.ErrNotFound, uuid)
	}
	if err != nil {
		d.Free()
		return nil, parsed{}, err
	}
	return d, p, nil
}

// Define implements hypervisor.Hypervisor.
func (h *Hypervisor) Define(ctx context.Context, spec hypervisor.DomainSpec) error {
	c, err := h.connect()
	if err != nil {
		return err
	}
	// Check everything the spec names before creating anything.
	pool, err := c.LookupStoragePoolByName(spec.StoragePool)
	if err != nil {
		if isCode(err, libvirt.ERR_NO_STORAGE_POOL) {
			return fmt.Errorf("%w: %q", hypervisor.ErrNoStoragePool, spec.StoragePool)
		}
		return h.check(err, "storage pool %q", spec.StoragePool)
	}
	defer pool.Free()
	base, err := pool.LookupStorageVolByName(spec.BaseImage)
	if err != nil {
		if isCode(err, libvirt.ERR_NO_STORAGE_VOL) {
			return fmt.Errorf("%w: %q in pool %q", hypervisor.ErrNoImage, spec.BaseImage, spec.StoragePool)
		}
		return h.check(err, "base image %q", spec.BaseImage)
	}
	defer base.Free()
	net, err := c.LookupNetworkByName(spec.Network)
	if err != nil {
		if isCode(err, libvirt.ERR_NO_NETWORK) {
			return fmt.Errorf("%w: %q", hypervisor.ErrNoNetwork, spec.Network)
		}
		return h.check(err, "network %q", spec.Network)
	}
	net.Free()
	if other, err := c.LookupDomainByName(spec.Name); err == nil {
		u, _ := other.GetUUIDString()
		other.Free()
		if u != spec.UUID {
			return fmt.Errorf("%w: %q has UUID %s", hypervisor.ErrNameTaken, spec.Name, u)
		}
	} else if !isCode(err, libvirt.ERR_NO_DOMAIN) {
		return h.check(err, "look up domain %q", spec.Name)
	}
	if d, err := c.LookupDomainByUUIDString(spec.UUID); err == nil {
		doc, xerr := d.GetXMLDesc(libvirt.DOMAIN_XML_INACTIVE)
		d.Free()
		if xerr != nil {
			return h.check(xerr, "domain %s XML", spec.UUID)
		}
		if p, perr := parseDomain(doc); perr != nil || !p.owned {
			return fmt.Errorf("%w: UUID %s belongs to a domain that is not nico's", hypervisor.ErrNameTaken, spec.UUID)
		}
	}
	typ := spec.Type
	if typ == "" {
		typ = h.defaultType()
	}
	offered, err := domainTypes(c)
	if err != nil {
		return h.check(err, "capabilities")
	}
	if !slices.Contains(offered, typ) {
		return fmt.Errorf("%w: domain type %q: this host offers %s", hypervisor.ErrUnsupported, typ, strings.Join(offered, ", "))
	}
	if err := h.ensureVolume(pool, base, spec); err != nil {
		return err
	}
	doc, err := domainXML(spec, typ, h.consoleLog(spec.UUID))
	if err != nil {
		return fmt.Errorf("libvirt: domain XML for %s: %w", spec.Name, err)
	}
	d, err := c.DomainDefineXML(doc)
	if err != nil {
		return h.check(err, "define %s", spec.Name)
	}
	d.Free()
	return nil
}

// ensureVolume creates the overlay when missing and grows it when smaller
// than the spec; it never shrinks it.
func (h *Hypervisor) ensureVolume(pool *libvirt.StoragePool, base *libvirt.StorageVol, spec hypervisor.DomainSpec) error {
	name := hypervisor.VolumeName(spec.UUID)
	want := uint64(spec.DiskGiB) << 30
	if v, err := pool.LookupStorageVolByName(name); err == nil {
		defer v.Free()
		info, err := v.GetInfo()
		if err != nil {
			return h.check(err, "volume %s", name)
		}
		if info.Capacity < want {
			if err := v.Resize(want, 0); isCode(err, libvirt.ERR_NO_SUPPORT) {
				return fmt.Errorf("%w: grow volume %s to %d GiB", hypervisor.ErrUnsupported, name, spec.DiskGiB)
			} else if err != nil {
				return h.check(err, "grow volume %s to %d GiB", name, spec.DiskGiB)
			}
		}
		return nil
	} else if !isCode(err, libvirt.ERR_NO_STORAGE_VOL) {
		return h.check(err, "look up volume %s", name)
	}
	path, err := base.GetPath()
	if err != nil {
		return h.check(err, "base image path")
	}
	format := "raw"
	if doc, err := base.GetXMLDesc(0); err == nil {
		if f := volumeFormat(doc); f != "" {
			format = f
		}
	}
	doc, err := volumeXML(name, spec.DiskGiB, path, format)
	if err != nil {
		return fmt.Errorf("libvirt: volume XML: %w", err)
	}
	v, err := pool.StorageVolCreateXML(doc, 0)
	if err != nil {
		return h.check(err, "create volume %s", name)
	}
	v.Free()
	return nil
}

// Start implements hypervisor.Hypervisor.
func (h *Hypervisor) Start(ctx context.Context, uuid string) error {
	c, err := h.connect()
	if err != nil {
		return err
	}
	d, _, err := h.lookup(c, uuid)
	if err != nil {
		return err
	}
	defer d.Free()
	if active, err := d.IsActive(); err == nil && active {
		return nil
	}
	return h.check(d.Create(), "start %s", uuid)
}

// Stop implements hypervisor.Hypervisor: ACPI shutdown, then destroy after
// grace (or when ctx ends first).
func (h *Hypervisor) Stop(ctx context.Context, uuid string, grace time.Duration) error {
	c, err := h.connect()
	if err != nil {
		return err
	}
	d, _, err := h.lookup(c, uuid)
	if err != nil {
		return err
	}
	defer d.Free()
	return h.stop(ctx, d, uuid, grace)
}

func (h *Hypervisor) stop(ctx context.Context, d *libvirt.Domain, uuid string, grace time.Duration) error {
	if active, err := d.IsActive(); err != nil || !active {
		return h.check(err, "state of %s", uuid)
	}
	if grace > 0 {
		if err := d.Shutdown(); err != nil && !isCode(err, libvirt.ERR_OPERATION_INVALID) {
			h.log.Debug("graceful shutdown refused; destroying", "uuid", uuid, "err", err)
		} else {
			deadline := time.NewTimer(grace)
			defer deadline.Stop()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
		wait:
			for {
				if active, err := d.IsActive(); err == nil && !active {
					return nil
				}
				select {
				case <-ctx.Done():
					break wait
				case <-deadline.C:
					h.log.Info("guest did not shut down in time; destroying", "uuid", uuid, "grace", grace)
					break wait
				case <-tick.C:
				}
			}
		}
	}
	if err := d.Destroy(); err != nil {
		if active, aerr := d.IsActive(); aerr == nil && !active {
			return nil
		}
		return h.check(err, "destroy %s", uuid)
	}
	return nil
}

// Undefine implements hypervisor.Hypervisor.
func (h *Hypervisor) Undefine(ctx context.Context, uuid string) error {
	c, err := h.connect()
	if err != nil {
		return err
	}
	d, p, err := h.lookup(c, uuid)
	if err != nil {
		return err
	}
	defer d.Free()
	if err := h.stop(ctx, d, uuid, 0); err != nil {
		return err
	}
	if err := d.Undefine(); err != nil {
		return h.check(err, "undefine %s", uuid)
	}
	h.removeConsoleLog(uuid, p.consoleLog)
	// Only the volume nico created for this domain is deleted.
	if p.meta.Volume != hypervisor.VolumeName(uuid) {
		return nil
	}
	pool, err := c.LookupStoragePoolByName(p.meta.StoragePool)
	if err != nil {
		return nil // the pool is gone, and the volume with it
	}
	defer pool.Free()
	v, err := pool.LookupStorageVolByName(p.meta.Volume)
	if err != nil {
		return nil
	}
	defer v.Free()
	return h.check(v.Delete(0), "delete volume %s", p.meta.Volume)
}

func freeAll(ds []libvirt.Domain) {
	for i := range ds {
		_ = ds[i].Free()
	}
}
