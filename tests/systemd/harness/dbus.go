package harness

import (
	"context"
	"fmt"
	"strconv"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// BusAddress is the guest's system bus as seen from the host: its
// dbus-daemon's socket through systemd's root (systemd's own private
// socket refuses clients from outside).
func (h *Host) BusAddress() string {
	return "unix:path=/proc/" + strconv.Itoa(h.PID) + "/root/run/dbus/system_bus_socket"
}

// Systemd connects to the guest's systemd over its system bus. Close it.
func (h *Host) Systemd(ctx context.Context) (*sddbus.Conn, error) {
	conn, err := sddbus.NewConnection(func() (*godbus.Conn, error) {
		c, err := godbus.Dial(h.BusAddress(), godbus.WithContext(ctx))
		if err != nil {
			return nil, err
		}
		if err := c.Auth(nil); err != nil {
			c.Close()
			return nil, err
		}
		if err := c.Hello(); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	})
	if err != nil {
		return nil, fmt.Errorf("harness: %s's system bus: %w", h.Name, err)
	}
	return conn, nil
}
