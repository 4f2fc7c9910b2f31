package meshscale

import (
	"fmt"

	"github.com/hashicorp/memberlist"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/tests/fleetkit"
)

// timings is the gossip profile and memberlist tuning named by
// -nico.meshscale.tune: large (the lan profile tuned by fleetkit.TuneLargeMesh), or one
// of the product's profiles as it ships (lan, wan).
func timings(name string) (gossip.Profile, func(*memberlist.Config), error) {
	switch name {
	case "large":
		return gossip.ProfileLAN, fleetkit.TuneLargeMesh, nil
	case "lan":
		return gossip.ProfileLAN, nil, nil
	case "wan":
		return gossip.ProfileWAN, nil, nil
	}
	return "", nil, fmt.Errorf("-nico.meshscale.tune=%q: use large, lan or wan", name)
}
