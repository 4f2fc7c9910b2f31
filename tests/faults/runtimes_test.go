package faults

import (
	"os"
	"path/filepath"
	"testing"
)

// etcdRuntime is one way the agents run their etcd members.
type etcdRuntime struct {
	name string // the subtest's name
	// label is added to a scenario's name in the report ("" for exec,
	// whose rows keep the names they always had).
	label string
	opt   func(*cluster)
}

// runtimes are the exec runtime (etcd a child process of the agent) and
// the embedded one (the member inside the agent).
var runtimes = []etcdRuntime{
	{name: "exec", opt: func(*cluster) {}},
	{name: "embedded", label: ", embedded etcd runtime", opt: func(c *cluster) { c.embedded = true }},
}

// forRuntimes runs f once per runtime, as a subtest named after it.
func forRuntimes(t *testing.T, f func(t *testing.T, rt etcdRuntime)) {
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) { f(t, rt) })
	}
}

// memberStarted reports whether node i's etcd member has started: its
// etcd child runs (exec), or its WAL exists (embedded: the member lives
// in the agent, which is running).
func (c *cluster) memberStarted(i int) bool {
	if !c.embedded {
		_, ok := c.nodes[i].agent.etcdPid()
		return ok
	}
	if ok, _ := c.nodes[i].agent.exited(); ok {
		return false
	}
	_, err := os.Stat(filepath.Join(c.etcdDir(i), "member", "wal"))
	return err == nil
}
