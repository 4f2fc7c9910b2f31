package integration

import (
	"testing"
	"time"
)

func TestBootstrapAndTwoJoins(t *testing.T) {
	f := newFleet(t)
	f.start(f.agentConfig("cp-1", true))
	f.waitVoters(30*time.Second, "cp-1")
	f.startCoordinator("cp-1")
	f.start(f.agentConfig("cp-2", false))
	f.start(f.agentConfig("cp-3", false))
	f.waitVoters(60*time.Second, "cp-1", "cp-2", "cp-3")
}
