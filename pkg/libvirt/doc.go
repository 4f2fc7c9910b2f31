// Package libvirt is the real hypervisor.Hypervisor, over libvirt's C
// library (libvirt.org/go/libvirt, cgo). It is the only package of nico
// that links libvirt; everything else sees the interface. A build without
// cgo (a static agent for guests) gets a Hypervisor that answers
// hypervisor.ErrUnavailable.
//
// The connection is opened on first use and reopened after it breaks: a
// call that fails because the connection is gone returns an error wrapping
// hypervisor.ErrUnavailable and drops the connection, and the caller retries
// with backoff. Domains are defined keyed by UUID, so a retry never creates
// a second domain.
package libvirt
