// Package membership plans changes to the etcd cluster's membership. Plan is
// a pure function of what was observed, the policy and the time: it reads no
// clock, no etcd and no host, and returns the one next step.
//
// A join goes through one operation, journaled before any side effect:
//
//	request --StartJoin--> [AddLearner] --AddLearner/AdoptLearner--> [Learner] --Promote--> FinishJoin
//	                                                                    |
//	                                   never started or stalled ------> AbortJoin (learner removed, node wipes and retries)
//
// A removal likewise:
//
//	request --(unsafe)--> RefuseRemove
//	request --StartRemove--> [RemoveMember] --(target leads)--> TransferLeader --> RemoveMember --> FinishRemove
//
// At most one operation is active, and at most one learner exists.
package membership
