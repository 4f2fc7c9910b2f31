package store

import "go.etcd.io/etcd/api/v3/mvccpb"

// ExternalMembersDir records the external members nico on-boarded (the
// EtcdCluster's spec.members of kind external), one key per member name
// holding its peer URL. It is written, fenced, in the transaction that
// journals the learner's addition and deleted once the member is gone, so
// that a member that leaves the spec is known as nico's to remove, and is
// never taken for a member nico knows nothing of.
const ExternalMembersDir = "external-members/"

// ExternalMemberKey is where external member name is recorded.
func ExternalMemberKey(name string) string { return ExternalMembersDir + name }

// ExternalMembersIn reads the records of a get of ExternalMembersDir:
// member name -> peer URL.
func ExternalMembersIn(kvs []*mvccpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		out[Name(string(kv.Key))] = string(kv.Value)
	}
	return out
}
