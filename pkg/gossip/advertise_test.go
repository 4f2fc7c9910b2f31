package gossip

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/logging"
)

func addr(ip, ifc string, up, def bool) HostAddr {
	return HostAddr{IP: net.ParseIP(ip), Interface: ifc, Up: up, Default: def}
}

var (
	lo4 = addr("127.0.0.1", "lo", true, false)
	lo6 = addr("::1", "lo", true, false)
)

func TestChooseAdvertise(t *testing.T) {
	tests := []struct {
		name    string
		addrs   []HostAddr
		want    string // "" with wantErr false: memberlist's own pick
		wantErr bool
	}{
		{"private on the default route", []HostAddr{lo4, addr("10.0.0.5", "eth0", true, true)}, "", false},
		{"private without a default route", []HostAddr{lo4, addr("192.168.7.2", "eth1", true, false), addr("11.1.2.3", "eth0", true, true)}, "", false},
		{"public on the default route", []HostAddr{lo4, lo6, addr("11.1.2.3", "eth0", true, true), addr("2a01:4f8::7", "eth0", true, true)}, "11.1.2.3", false},
		{"IPv6 public only", []HostAddr{lo4, addr("fe80::1", "eth0", true, true), addr("2a01:4f8::7", "eth0", true, true)}, "2a01:4f8::7", false},
		{"one public, no default route", []HostAddr{lo4, addr("11.1.2.3", "eth0", true, false)}, "11.1.2.3", false},
		{"several public, none on the default route", []HostAddr{lo4, addr("11.1.2.3", "eth0", true, false), addr("12.1.2.3", "eth1", true, false)}, "", true},
		{"several public, one on the default route", []HostAddr{addr("11.1.2.3", "eth0", true, false), addr("12.1.2.3", "eth1", true, true)}, "12.1.2.3", false},
		{"loopback only", []HostAddr{lo6, lo4}, "127.0.0.1", false},
		{"IPv6 loopback only", []HostAddr{lo6}, "::1", false},
		{"private on a down interface", []HostAddr{lo4, addr("10.0.0.5", "eth0", false, false)}, "127.0.0.1", false},
		{"loopback and link-local", []HostAddr{lo4, addr("fe80::1", "eth0", true, false)}, "", true},
		{"nothing up", []HostAddr{addr("127.0.0.1", "lo", false, false)}, "", true},
		{"no address", nil, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := ChooseAdvertise(tt.addrs)
			if tt.wantErr {
				if !errors.Is(err, ErrNoAdvertise) || !strings.Contains(err.Error(), "set gossip.advertise") {
					t.Fatalf("ChooseAdvertise = %q, %v; want ErrNoAdvertise naming gossip.advertise", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ChooseAdvertise = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestStartAdvertisesFromTheHostAddresses: a member bound to 0.0.0.0 with
// no gossip.advertise starts on a loopback-only host and advertises
// 127.0.0.1; on a host with no address it fails naming gossip.advertise;
// gossip.advertise and a specific gossip.bind are used as they are.
func TestStartAdvertisesFromTheHostAddresses(t *testing.T) {
	start := func(cfg Config) (*Mesh, error) {
		t.Helper()
		cfg.Name, cfg.Profile, cfg.Token, cfg.Logger = "m", ProfileFast, []byte("test-token"), logging.Test(t)
		m, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Shutdown() })
		return m, m.Start()
	}
	hosts := func(a ...HostAddr) HostAddrsFunc { return func() ([]HostAddr, error) { return a, nil } }

	m, err := start(Config{BindAddr: "0.0.0.0", HostAddrs: hosts(lo4, lo6)})
	if err != nil {
		t.Fatalf("loopback-only host: %v", err)
	}
	if host, _, _ := net.SplitHostPort(m.Addr()); host != "127.0.0.1" {
		t.Errorf("loopback-only host advertises %q, want 127.0.0.1", m.Addr())
	}

	_, err = start(Config{BindAddr: "0.0.0.0", HostAddrs: hosts(addr("fe80::1", "eth0", true, false))})
	if !errors.Is(err, ErrStart) || !errors.Is(err, ErrNoAdvertise) || !strings.Contains(err.Error(), "set gossip.advertise") {
		t.Errorf("no usable address: %v; want ErrStart and ErrNoAdvertise naming gossip.advertise", err)
	}

	never := func() ([]HostAddr, error) {
		t.Error("host addresses read with gossip.advertise or gossip.bind set")
		return nil, nil
	}
	m, err = start(Config{BindAddr: "0.0.0.0", AdvertiseAddr: "127.0.0.41", HostAddrs: never})
	if err != nil {
		t.Fatal(err)
	}
	if host, _, _ := net.SplitHostPort(m.Addr()); host != "127.0.0.41" {
		t.Errorf("with gossip.advertise: advertises %q, want 127.0.0.41", m.Addr())
	}
	m, err = start(Config{BindAddr: "127.0.0.42", HostAddrs: never})
	if err != nil {
		t.Fatal(err)
	}
	if host, _, _ := net.SplitHostPort(m.Addr()); host != "127.0.0.42" {
		t.Errorf("bound to 127.0.0.42: advertises %q", m.Addr())
	}
}
