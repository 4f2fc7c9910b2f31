package etcdtest

import "time"

// CallBudget bounds a test's call to etcd whose failure fails the test or
// is taken as its answer (an admin's health timeout, a one-shot check):
// long enough for a machine whose cores are busy with other tests, not a
// measure of speed. A call to a member that is down waits all of it.
const CallBudget = 30 * time.Second
