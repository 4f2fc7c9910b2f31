// Package pki is nico's certificate authority: one ECDSA P-256 cluster CA
// that issues every etcd member its server and peer certificates and every
// agent, coordinator and nicoctl its client certificate (docs/security.md).
//
// It holds no state of its own: a CA is a certificate and a key, leaves are
// PEM bytes the caller writes with WriteFile (atomic, 0600, parent 0700) into
// the layout Dir names. NeedsRenewal and DueLeaves decide, Renewer applies.
// ClientTLS and ServerTLS build tls.Configs that read the key pair from disk
// on every handshake, so a renewed certificate is used without a restart.
package pki
