package store

import clientv3 "go.etcd.io/etcd/client/v3"

// PutValueOp writes value at key as it is, in a transaction: for the
// keys that hold a plain string rather than an object (the active
// operation's name, a claim's owner, an external member's peer URL).
func PutValueOp(key, value string) clientv3.Op { return clientv3.OpPut(key, value) }
