package store

import clientv3 "go.etcd.io/etcd/client/v3"

// DeleteOp deletes key in a transaction; deleting an absent key is not an
// error.
func DeleteOp(key string) clientv3.Op { return clientv3.OpDelete(key) }

// PutValueOp writes value at key as it is, for values that are not JSON
// objects (a name, a time, a sealed secret), in a transaction.
func PutValueOp(key, value string) clientv3.Op { return clientv3.OpPut(key, value) }

// ValueIs is a comparison that holds when key holds value; it fails when
// key is absent.
func ValueIs(key, value string) clientv3.Cmp {
	return clientv3.Compare(clientv3.Value(key), "=", value)
}
