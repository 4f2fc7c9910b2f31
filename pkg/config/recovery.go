package config

import "fmt"

// DefaultRecoveryPort is the port of a control-plane agent's recovery API
// (agent/recovery).
const DefaultRecoveryPort = 7951

// Recovery is the recovery API a control-plane agent serves over mutual
// TLS with its pki.dir (the member's server certificate, the fleet CA):
// nicoctl restore and recover --agents act on the host through it.
type Recovery struct {
	Listen string // "recovery.listen": host:port; empty serves nothing
}

// recoveryKeys are the agent's recovery API keys.
func recoveryKeys(r *Recovery) []key {
	return []key{
		stringKey("recovery.listen", &r.Listen, fmt.Sprintf(":%d", DefaultRecoveryPort),
			"host:port of the recovery API control-plane agents with a pki.dir serve (HTTPS, only the operator's root certificate accepted) for nicoctl restore and recover --agents; empty serves nothing", orEmpty(hostPort)),
	}
}
