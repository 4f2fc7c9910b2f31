package store

import clientv3 "go.etcd.io/etcd/client/v3"

// DeleteOp deletes key in a transaction; an absent key is no error.
func DeleteOp(key string) clientv3.Op { return clientv3.OpDelete(key) }
