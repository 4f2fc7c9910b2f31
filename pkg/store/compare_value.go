package store

import clientv3 "go.etcd.io/etcd/client/v3"

// ValueIs is a comparison that holds while key holds exactly value; it
// fails when key is absent.
func ValueIs(key, value string) clientv3.Cmp {
	return clientv3.Compare(clientv3.Value(key), "=", value)
}
