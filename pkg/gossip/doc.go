// Package gossip owns nico's gossip mesh: every agent and every coordinator
// candidate is a member of one hashicorp/memberlist cluster. Through it a
// new machine finds the cluster from one seed address (each member
// publishes compact metadata, among it the etcd client URL it serves), and
// the coordinator learns within about a second that a machine is gone.
//
// # Lifecycle
//
// New validates the configuration and encodes the metadata; it binds and
// starts nothing. Start binds the ports and starts memberlist; Join
// contacts seeds; Leave tells the others this member is going (they see it
// "left" at once rather than after suspicion); Shutdown closes the ports.
// Each is idempotent. Run does all of it under one context. Seeds are for
// the first contact only: a member that is alone rejoins through its
// seeds, then the peers it last saw (PeersFile), then its PeerSource
// (peers.go).
//
// # States of a peer, as this member sees it
//
//	       join / alive message
//	(new) ----------------------> alive <-----------------+
//	                               |  ^                    |
//	        probe failed (direct,  |  | refuted (it        | alive message
//	        indirect and TCP)      v  | answered)          | (it came back)
//	                             suspect                   |
//	                               |                       |
//	      suspicion timeout        v                       |
//	                              dead --------------------+
//	graceful Leave --------------> left -------------------+
//
// memberlist reports join, leave (dead or left) and update through its
// EventDelegate; it has no event for suspect and does not keep
// Node.State current, so a member whose probe fails records the peer
// suspect and gossips that as a user message, which every member records
// too (suspicion.go); a suspect that answers a ping, or that memberlist
// still lists after its longest suspicion timeout, is alive again.
// Every state carries the local time it changed.
//
// # Profiles
//
// Timing comes from a profile; what a failure costs to detect and what the
// probing costs in traffic, per member:
//
//	profile  probe every  probe timeout  suspicion mult  gossip      push-pull  crash seen dead after   probe traffic
//	lan      1 s          500 ms         4               200 ms x3   30 s       ~5-6 s (3 to 5 members)  1 ping+ack/s
//	wan      5 s          3 s            6               500 ms x4   60 s       ~30 s                    0.2 ping+ack/s
//	fast     100 ms       50 ms          2               50 ms x3    5 s        ~0.4-1 s                 10 ping+ack/s
//
// A ping and its ack are each one UDP packet of about 40 bytes before
// encryption (+28 bytes of AES-GCM framing); push-pull is a TCP exchange of
// the whole member list (about 80 bytes plus the metadata per member), so a
// 100-member lan mesh exchanges ~30 KB per member every 30 s. fast is for
// tests and small, quiet networks.
//
// # Encryption and keys
//
// Every message is encrypted with AES-256-GCM. The key of generation g is
// derived from the cluster token (the content of tokenFile) with
// HKDF-SHA256: key = HKDF(secret=token, salt="nico gossip v1",
// info="key generation <g>", 32 bytes). Each member keeps the keys of
// generations g-1, g and g+1 in its keyring and encrypts with g's, so
// rotating the generation (nicoctl gossip rotate-key) is one store write:
// members that have not yet seen the new generation still hold its key, and
// those that have still hold the old one. Rotating the generation protects
// against the leak of one derived key; a leaked token needs a new secret:
// SetKey makes a new secret that of generation g and later, keeping the
// replaced one for g-1 until DropPreviousSecret (package gossipkey seals
// the new secret to each node and follows it).
// A message no key decrypts is dropped and logged once per sender and
// interval, never in a loop.
package gossip
