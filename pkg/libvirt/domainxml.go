package libvirt

import (
	"encoding/xml"
	"fmt"
	"math"
	"strings"

	"github.com/homystack/nico/pkg/hypervisor"
	"libvirt.org/go/libvirtxml"
)

// MetadataNS is the XML namespace of nico's domain metadata; a domain
// without it is not nico's and is never touched.
const MetadataNS = "https://homystack.io/nico/domain/1"

// metadata is what nico records in a domain's <metadata>.
type metadata struct {
	Machine     string `xml:"name"`
	Pool        string `xml:"pool"`
	StoragePool string `xml:"storagePool"`
	BaseImage   string `xml:"baseImage"`
	Volume      string `xml:"volume"`
}

// domainXML builds the domain definition for spec with libvirtxml, of type
// domType; with consoleLog, the serial console is also logged to that file,
// emptied at each start.
func domainXML(spec hypervisor.DomainSpec, domType, consoleLog string) (string, error) {
	metaXML, err := metadataXML(metadata{Machine: spec.Name, Pool: spec.Pool, StoragePool: spec.StoragePool, BaseImage: spec.BaseImage, Volume: hypervisor.VolumeName(spec.UUID)})
	if err != nil {
		return "", err
	}
	d := &libvirtxml.Domain{
		Type:     domType,
		Name:     spec.Name,
		UUID:     spec.UUID,
		Metadata: &libvirtxml.DomainMetadata{XML: metaXML},
		Memory:   &libvirtxml.DomainMemory{Value: uint(spec.MemoryMiB), Unit: "MiB"},
		VCPU:     &libvirtxml.DomainVCPU{Value: uint(spec.VCPUs)},
		SysInfo: []libvirtxml.DomainSysInfo{{SMBIOS: &libvirtxml.DomainSysInfoSMBIOS{
			OEMStrings: &libvirtxml.DomainSysInfoOEMStrings{Entry: spec.Identity.OEMStrings()},
		}}},
		OS: &libvirtxml.DomainOS{
			Type:        &libvirtxml.DomainOSType{Type: "hvm"},
			BootDevices: []libvirtxml.DomainBootDevice{{Dev: "hd"}},
			SMBios:      &libvirtxml.DomainSMBios{Mode: "sysinfo"},
		},
		// ACPI: a graceful shutdown is an ACPI power button press, and a
		// guest can only power itself off through ACPI.
		Features:   &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}, APIC: &libvirtxml.DomainFeatureAPIC{}},
		OnPoweroff: "destroy",
		OnReboot:   "restart",
		OnCrash:    "destroy",
		Devices: &libvirtxml.DomainDeviceList{
			Disks: []libvirtxml.DomainDisk{{
				Device: "disk",
				Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "qcow2"},
				Source: &libvirtxml.DomainDiskSource{Volume: &libvirtxml.DomainDiskSourceVolume{Pool: spec.StoragePool, Volume: hypervisor.VolumeName(spec.UUID)}},
				Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
			}},
			Interfaces: []libvirtxml.DomainInterface{{
				MAC:    &libvirtxml.DomainInterfaceMAC{Address: spec.MAC},
				Source: &libvirtxml.DomainInterfaceSource{Network: &libvirtxml.DomainInterfaceSourceNetwork{Network: spec.Network}},
				Model:  &libvirtxml.DomainInterfaceModel{Type: "virtio"},
			}},
			Serials: []libvirtxml.DomainSerial{{Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}}}},
			// A virtio RNG seeds the guest's entropy at boot (without it,
			// and without RDRAND under emulation, getrandom blocks).
			RNGs: []libvirtxml.DomainRNG{{Model: "virtio", Backend: &libvirtxml.DomainRNGBackend{Random: &libvirtxml.DomainRNGBackendRandom{Device: "/dev/urandom"}}}},
			Channels: []libvirtxml.DomainChannel{{
				Source: &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{Mode: "bind"}},
				Target: &libvirtxml.DomainChannelTarget{VirtIO: &libvirtxml.DomainChannelTargetVirtIO{Name: "org.qemu.guest_agent.0"}},
			}},
		},
	}
	if spec.Kernel != "" {
		// Direct kernel boot: the firmware loads the kernel and initrd from
		// the host's files; the disk is still attached.
		d.OS.BootDevices = nil
		d.OS.Kernel, d.OS.Initrd, d.OS.Cmdline = spec.Kernel, spec.Initrd, spec.Cmdline
	}
	if consoleLog != "" {
		d.Devices.Serials[0].Log = &libvirtxml.DomainChardevLog{File: consoleLog, Append: "off"}
	}
	if domType == "test" {
		d.Devices.Channels = nil // the test driver has no guest agent channel
		d.Devices.RNGs = nil     // nor RNG devices
	}
	return d.Marshal()
}

// metadataXML writes m as a nico:machine element: libvirt keeps only
// metadata elements with a namespace prefix.
func metadataXML(m metadata) (string, error) {
	var b strings.Builder
	enc := xml.NewEncoder(&b)
	el := func(name string) xml.Name { return xml.Name{Local: "nico:" + name} }
	root := xml.StartElement{Name: el("machine"), Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns:nico"}, Value: MetadataNS}}}
	if err := enc.EncodeToken(root); err != nil {
		return "", err
	}
	for _, f := range [][2]string{{"name", m.Machine}, {"pool", m.Pool}, {"storagePool", m.StoragePool}, {"baseImage", m.BaseImage}, {"volume", m.Volume}} {
		if err := enc.EncodeElement(f[1], xml.StartElement{Name: el(f[0])}); err != nil {
			return "", err
		}
	}
	if err := enc.EncodeToken(root.End()); err != nil {
		return "", err
	}
	if err := enc.Flush(); err != nil {
		return "", err
	}
	return b.String(), nil
}

// parsed is a domain definition read back: the owned fields, and whether it
// is nico's at all.
type parsed struct {
	owned bool
	spec  hypervisor.DomainSpec
	meta  metadata
	// consoleLog is the file the serial console is logged to, if any.
	consoleLog string
}

// parseDomain reads the owned fields back from a definition.
func parseDomain(doc string) (parsed, error) {
	var d libvirtxml.Domain
	if err := d.Unmarshal(doc); err != nil {
		return parsed{}, fmt.Errorf("libvirt: parse domain XML: %w", err)
	}
	var p parsed
	if d.Metadata == nil {
		return p, nil
	}
	var m metadata
	dec := xml.NewDecoder(strings.NewReader(d.Metadata.XML))
	for {
		tok, err := dec.Token()
		if err != nil {
			return p, nil // no nico element
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Space == MetadataNS && se.Name.Local == "machine" {
			if err := dec.DecodeElement(&m, &se); err != nil {
				return p, fmt.Errorf("libvirt: domain %s: nico metadata: %w", d.Name, err)
			}
			break
		}
	}
	p.owned, p.meta = true, m
	p.spec = hypervisor.DomainSpec{UUID: d.UUID, Name: d.Name, Type: d.Type, Pool: m.Pool, StoragePool: m.StoragePool, BaseImage: m.BaseImage}
	if d.VCPU != nil {
		if d.VCPU.Value > maxVCPUs {
			return parsed{}, fmt.Errorf("libvirt: domain %s: %d vCPUs is out of range (at most %d)", d.Name, d.VCPU.Value, maxVCPUs)
		}
		p.spec.VCPUs = int(d.VCPU.Value)
	}
	if d.OS != nil {
		p.spec.Kernel, p.spec.Initrd, p.spec.Cmdline = d.OS.Kernel, d.OS.Initrd, d.OS.Cmdline
	}
	if d.Memory != nil {
		mib := memMiB(d.Memory.Value, d.Memory.Unit)
		if mib > maxMemoryMiB {
			return parsed{}, fmt.Errorf("libvirt: domain %s: memory %d %s is out of range (at most %d MiB)", d.Name, d.Memory.Value, d.Memory.Unit, maxMemoryMiB)
		}
		p.spec.MemoryMiB = int(mib)
	}
	if d.Devices != nil && len(d.Devices.Serials) > 0 && d.Devices.Serials[0].Log != nil {
		p.consoleLog = d.Devices.Serials[0].Log.File
	}
	if d.Devices != nil && len(d.Devices.Interfaces) > 0 {
		i := d.Devices.Interfaces[0]
		if i.MAC != nil {
			p.spec.MAC = i.MAC.Address
		}
		if i.Source != nil && i.Source.Network != nil {
			p.spec.Network = i.Source.Network.Network
		}
	}
	return p, nil
}

// Bounds of what parseDomain accepts from a definition: far above any host
// (libvirt's own vCPU limit is in the thousands), and small enough that the
// values fit an int on every platform.
const (
	maxVCPUs     = 1 << 16
	maxMemoryMiB = 1<<31 - 1
)

// memMiB converts a libvirt memory value to MiB; a value too large for
// uint64 in MiB saturates.
func memMiB(v uint, unit string) uint64 {
	switch strings.ToLower(unit) {
	case "b", "bytes":
		return uint64(v) >> 20
	case "", "k", "kib":
		return uint64(v) >> 10
	case "m", "mib":
		return uint64(v)
	case "g", "gib":
		if uint64(v) > math.MaxUint64>>10 {
			return math.MaxUint64
		}
		return uint64(v) << 10
	}
	return uint64(v) >> 10
}

// volumeXML is the definition of a domain's copy-on-write overlay of the
// base image.
func volumeXML(name string, capacityGiB int, basePath, baseFormat string) (string, error) {
	v := &libvirtxml.StorageVolume{
		Name:     name,
		Capacity: &libvirtxml.StorageVolumeSize{Unit: "GiB", Value: uint64(capacityGiB)},
		Target:   &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: "qcow2"}},
		BackingStore: &libvirtxml.StorageVolumeBackingStore{
			Path:   basePath,
			Format: &libvirtxml.StorageVolumeTargetFormat{Type: baseFormat},
		},
	}
	return v.Marshal()
}

// volumeFormat reads a volume's format from its definition.
func volumeFormat(doc string) string {
	var v libvirtxml.StorageVolume
	if err := v.Unmarshal(doc); err != nil || v.Target == nil || v.Target.Format == nil {
		return ""
	}
	return v.Target.Format.Type
}
