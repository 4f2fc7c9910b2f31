package store

import clientv3 "go.etcd.io/etcd/client/v3"

// DeleteOp deletes key in a transaction; an absent key is no error.
func DeleteOp(key string) clientv3.Op { return clientv3.OpDelete(key) }

// PutValueOp writes value at key as it is, in a transaction: for the
// keys that hold a plain string rather than an object (the active
// operation's name, a cluster claim's owner, an external member's peer
// URL, the nudge).
func PutValueOp(key, value string) clientv3.Op { return clientv3.OpPut(key, value) }

// ValueIs is a comparison that holds while key holds exactly value; it
// fails when key is absent.
func ValueIs(key, value string) clientv3.Cmp {
	return clientv3.Compare(clientv3.Value(key), "=", value)
}

// DeleteDirOp deletes every key under dir in a transaction.
func DeleteDirOp(dir string) clientv3.Op { return clientv3.OpDelete(dir, clientv3.WithPrefix()) }

// PutLeasedOp is PutValueOp bound to lease: the key is gone when the
// lease ends.
func PutLeasedOp(key, value string, lease clientv3.LeaseID) clientv3.Op {
	return clientv3.OpPut(key, value, clientv3.WithLease(lease))
}
