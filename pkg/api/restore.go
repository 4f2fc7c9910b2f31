package api

// OpRestore is the operation type of a restore from a snapshot (package
// restore): it holds the one-change-in-flight slot in the restored cluster
// until every other member has rejoined as a learner and been promoted.
const OpRestore OpType = "Restore"

// OpRecover is the operation type of a quorum-loss recovery (package
// restore): one survivor made a single-member cluster, the others rejoin.
const OpRecover OpType = "Recover"
