package libvirt

import (
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/hypervisor/hypervisortest"
)

// FuzzParseDomain feeds parseDomain the domain definitions libvirt hands
// back, which anyone with access to the host can edit. It needs no libvirt
// connection. A definition is either refused with an error, or foreign (no
// spec at all), or nico's: then its sizes are sane and rendering the parsed
// spec and parsing it again changes nothing nico owns.
func FuzzParseDomain(f *testing.F) {
	spec := hypervisortest.Spec("web-0", "11111111-2222-4333-8444-555555555501")
	spec.Identity.Token = "tok"
	for _, typ := range []string{"kvm", "test"} {
		doc, err := domainXML(spec, typ, "/var/log/libvirt/qemu/nico-"+spec.UUID+"-console.log")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(doc)
	}
	f.Add(`<domain type="kvm"><name>x</name><metadata><other:machine xmlns:other="https://example.org/1"><other:name>x</other:name></other:machine></metadata></domain>`)
	f.Add(`<domain type="kvm"><name>x</name></domain>`)
	f.Add(`<domain type="test"><name>m</name><memory unit="GiB">4</memory><vcpu>2</vcpu><metadata><nico:machine xmlns:nico="` + MetadataNS + `"><nico:name>m</nico:name><nico:pool>p</nico:pool></nico:machine></metadata></domain>`)
	f.Add(`<domain><memory unit="b">18446744073709551615</memory><vcpu>18446744073709551615</vcpu><metadata><nico:machine xmlns:nico="` + MetadataNS + `"/></metadata></domain>`)
	f.Add(`<domain><metadata><nico:machine xmlns:nico="` + MetadataNS + `"><nico:name>`)
	f.Fuzz(func(t *testing.T, doc string) {
		p, err := parseDomain(doc)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "libvirt: ") {
				t.Fatalf("error %q does not say where it comes from", err)
			}
			return
		}
		if !p.owned {
			if p.spec.Name != "" || p.spec.VCPUs != 0 || p.spec.MemoryMiB != 0 {
				t.Fatalf("a foreign domain yields a spec: %+v", p.spec)
			}
			return
		}
		if p.spec.VCPUs < 0 || p.spec.MemoryMiB < 0 {
			t.Fatalf("parsed negative sizes: %d vCPUs, %d MiB", p.spec.VCPUs, p.spec.MemoryMiB)
		}
		again, err := domainXML(p.spec, "test", p.consoleLog)
		if err != nil {
			t.Fatalf("parsed spec %+v does not render: %v", p.spec, err)
		}
		q, err := parseDomain(again)
		if err != nil || !q.owned {
			t.Fatalf("rendered spec does not parse back (owned=%v): %v\n%s", q.owned, err, again)
		}
		if d := p.spec.Differs(q.spec); len(d) > 0 {
			t.Fatalf("round trip changed %v: %+v became %+v", d, p.spec, q.spec)
		}
		if p.spec.Name != q.spec.Name || p.spec.Pool != q.spec.Pool || p.spec.StoragePool != q.spec.StoragePool || p.spec.BaseImage != q.spec.BaseImage {
			t.Fatalf("round trip changed names: %+v became %+v", p.spec, q.spec)
		}
	})
}
