package store

// ExternalMembersDir records the external members nico on-boarded (the
// EtcdCluster's spec.members of kind external), one key per member name
// holding its peer URL. It is written, fenced, in the transaction that
// journals the learner's addition and deleted once the member is gone, so
// that a member that leaves the spec is known as nico's to remove, and is
// never taken for a member nico knows nothing of.
const ExternalMembersDir = "external-members/"

// ExternalMemberKey is where external member name is recorded.
func ExternalMemberKey(name string) string { return ExternalMembersDir + name }
