//go:build cgo

package libvirt_test

import (
	"testing"

	"github.com/homystack/nico/pkg/hypervisor/hypervisortest"
	"github.com/homystack/nico/pkg/libvirt"
	"github.com/homystack/nico/pkg/libvirt/libvirttest"
	"github.com/homystack/nico/pkg/logging"
)

// TestContract runs the hypervisor contract against libvirt's test driver,
// in process, each case on a host of its own.
func TestContract(t *testing.T) {
	hypervisortest.Contract(t, func(t *testing.T, foreign ...string) hypervisortest.Env {
		hv := libvirt.New(libvirttest.URI(t, libvirttest.Options{Foreign: foreign}), logging.Test(t))
		t.Cleanup(func() { hv.Close() })
		e := hypervisortest.Env{HV: hv, Foreign: map[string]string{}}
		for i, name := range foreign {
			e.Foreign[name] = libvirttest.ForeignUUID(i)
		}
		return e
	})
}
