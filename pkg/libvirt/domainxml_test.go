package libvirt

import (
	"slices"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/hypervisor"
	"github.com/homystack/nico/pkg/hypervisor/hypervisortest"
	"libvirt.org/go/libvirtxml"
)

func TestDomainXML(t *testing.T) {
	spec := hypervisortest.Spec("web-0", "11111111-2222-4333-8444-555555555501")
	spec.Identity.Token = "tok"
	doc, err := domainXML(spec, "kvm", "/var/log/libvirt/qemu/nico-"+spec.UUID+"-console.log")
	if err != nil {
		t.Fatal(err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(doc); err != nil {
		t.Fatal(err)
	}
	if l := d.Devices.Serials[0].Log; l == nil || l.File != "/var/log/libvirt/qemu/nico-"+spec.UUID+"-console.log" || l.Append != "off" {
		t.Fatalf("console log %+v", l)
	}
	if d.Type != "kvm" || d.OS.SMBios.Mode != "sysinfo" || len(d.SysInfo) != 1 || d.Features == nil || d.Features.ACPI == nil || len(d.Devices.RNGs) != 1 {
		t.Fatalf("domain %s", doc)
	}
	oem := d.SysInfo[0].SMBIOS.OEMStrings.Entry
	if !slices.Contains(oem, "io.systemd.credential:nico.name=web-0") || !slices.Contains(oem, "io.systemd.credential:nico.token=tok") {
		t.Fatalf("OEM strings %q", oem)
	}
	if src := d.Devices.Disks[0].Source.Volume; src.Pool != "default" || src.Volume != hypervisor.VolumeName(spec.UUID) {
		t.Fatalf("disk %+v", src)
	}
	if !strings.Contains(doc, `<nico:machine xmlns:nico="`+MetadataNS+`">`) {
		t.Fatalf("metadata not namespaced: %s", d.Metadata.XML)
	}
	p, err := parseDomain(doc)
	p.spec.DiskGiB = spec.DiskGiB // read from the volume, not the definition
	if err != nil || !p.owned || len(spec.Differs(p.spec)) != 0 || p.meta.Volume != hypervisor.VolumeName(spec.UUID) || p.spec.Pool != "pool" ||
		p.spec.Type != "kvm" || p.consoleLog != d.Devices.Serials[0].Log.File {
		t.Fatalf("parsed %+v %v", p, err)
	}
}

func TestDomainXMLKernelBoot(t *testing.T) {
	spec := hypervisortest.Spec("web-0", "11111111-2222-4333-8444-555555555501")
	spec.Kernel, spec.Initrd, spec.Cmdline = "/boot/vmlinuz", "/boot/initrd.img", "console=ttyS0"
	doc, err := domainXML(spec, "qemu", "")
	if err != nil {
		t.Fatal(err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(doc); err != nil {
		t.Fatal(err)
	}
	if d.OS.Kernel != spec.Kernel || d.OS.Initrd != spec.Initrd || d.OS.Cmdline != spec.Cmdline || len(d.OS.BootDevices) != 0 || d.OS.SMBios.Mode != "sysinfo" {
		t.Fatalf("kernel boot: %s", doc)
	}
	if d.Devices.Serials[0].Log != nil {
		t.Fatalf("console logged without a file: %s", doc)
	}
	p, err := parseDomain(doc)
	p.spec.DiskGiB = spec.DiskGiB
	if err != nil || len(spec.Differs(p.spec)) != 0 || p.consoleLog != "" {
		t.Fatalf("parsed %+v %v, differs %v", p.spec, err, spec.Differs(p.spec))
	}
}

func TestForeignMetadataIsNotNicos(t *testing.T) {
	doc := `<domain type="kvm"><name>x</name><metadata><other:machine xmlns:other="https://example.org/1"><other:name>x</other:name></other:machine></metadata></domain>`
	if p, err := parseDomain(doc); err != nil || p.owned {
		t.Fatalf("parsed %+v %v", p, err)
	}
	if p, err := parseDomain(`<domain type="kvm"><name>x</name></domain>`); err != nil || p.owned {
		t.Fatalf("parsed %+v %v", p, err)
	}
}
