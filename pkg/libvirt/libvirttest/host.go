// Package libvirttest makes hosts of libvirt's test driver for tests: each
// is a test:///FILE connection with its own in-process state (no daemon), a
// "default" network, a "default" storage pool of 100 GiB (the driver's
// fixed size) holding the base image "base.qcow2", the CPUs and memory asked
// for, and optional foreign domains.
package libvirttest

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"libvirt.org/go/libvirtxml"
)

// Options describe a test host.
type Options struct {
	VCPUs     int // 16 when 0
	MemoryMiB int // 8192 when 0
	// ExtraPools are more storage pools like "default" (each with
	// base.qcow2), for more than 99 GiB of volumes.
	ExtraPools []string
	// Foreign names domains that are not nico's, defined and running.
	Foreign []string
}

// node is the test driver's configuration file.
type node struct {
	XMLName xml.Name `xml:"node"`
	CPU     struct {
		MHz     int    `xml:"mhz"`
		Model   string `xml:"model"`
		Nodes   int    `xml:"nodes"`
		Sockets int    `xml:"sockets"`
		Cores   int    `xml:"cores"`
		Threads int    `xml:"threads"`
		Active  int    `xml:"active"`
	} `xml:"cpu"`
	Memory  int        `xml:"memory"` // KiB
	Domains []xmlNode  `xml:"domain"`
	Network xmlNode    `xml:"network"`
	Pools   []poolNode `xml:"pool"`
}

type xmlNode struct {
	Inner string `xml:",innerxml"`
	Type  string `xml:"type,attr,omitempty"`
}

type poolNode struct {
	Type   string    `xml:"type,attr"`
	Inner  string    `xml:",innerxml"`
	Volume []xmlNode `xml:"volume"`
}

// URI writes a test host's configuration and returns its connection URI.
func URI(t testing.TB, o Options) string {
	t.Helper()
	if o.VCPUs == 0 {
		o.VCPUs = 16
	}
	if o.MemoryMiB == 0 {
		o.MemoryMiB = 8192
	}
	var n node
	n.CPU.MHz, n.CPU.Model, n.CPU.Nodes, n.CPU.Sockets, n.CPU.Cores, n.CPU.Threads, n.CPU.Active = 2000, "x86_64", 1, 1, o.VCPUs, 1, o.VCPUs
	n.Memory = o.MemoryMiB << 10
	dir := t.TempDir()
	n.Network = xmlNode{Inner: `<name>default</name><bridge name="virbr0"/><forward/><ip address="192.168.122.1" netmask="255.255.255.0"><dhcp><range start="192.168.122.2" end="192.168.122.254"/></dhcp></ip>`}
	for i, name := range append([]string{"default"}, o.ExtraPools...) {
		path := filepath.Join(dir, fmt.Sprintf("pool-%d", i))
		n.Pools = append(n.Pools, poolNode{Type: "dir",
			// The test driver gives every pool 100 GiB, whatever is written.
			Inner:  fmt.Sprintf(`<name>%s</name><target><path>%s</path></target>`, name, path),
			Volume: []xmlNode{{Inner: `<name>base.qcow2</name><capacity unit="GiB">1</capacity><target><format type="qcow2"/></target>`}},
		})
	}
	for i, name := range o.Foreign {
		d := libvirtxml.Domain{Type: "test", Name: name, UUID: fmt.Sprintf("f0000000-0000-4000-8000-%012d", i+1),
			Memory: &libvirtxml.DomainMemory{Value: 128, Unit: "MiB"}, VCPU: &libvirtxml.DomainVCPU{Value: 1},
			OS: &libvirtxml.DomainOS{Type: &libvirtxml.DomainOSType{Type: "hvm"}}}
		b, err := xml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var inner struct {
			Inner string `xml:",innerxml"`
		}
		if err := xml.Unmarshal(b, &inner); err != nil {
			t.Fatal(err)
		}
		n.Domains = append(n.Domains, xmlNode{Type: "test", Inner: inner.Inner})
	}
	b, err := xml.MarshalIndent(n, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "node.xml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return "test://" + path
}

// ForeignUUID is the UUID of the i-th foreign domain of Options.Foreign.
func ForeignUUID(i int) string { return fmt.Sprintf("f0000000-0000-4000-8000-%012d", i+1) }
