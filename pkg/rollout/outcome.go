package rollout

import (
	"fmt"
	"strings"
)

// Outcome says in an operator's words how step s ended the rollout step
// it closes (the message of that step's operation); undo tells a revert
// from a roll forward. Steps that close no operation read as String.
func (s Step) Outcome(undo bool) string {
	nodes := strings.Join(s.Nodes, ", ")
	switch s.Action {
	case MarkDone:
		if s.Reason != "" {
			return nodes + ": " + s.Reason
		}
		did, is := "applied the new configuration", "is healthy"
		if undo {
			did = "went back to its previous configuration"
		}
		if len(s.Nodes) > 1 {
			did, is = strings.Replace(did, "its", "their", 1), "are healthy"
		}
		return fmt.Sprintf("%s %s and %s", nodes, did, is)
	case Halt:
		if nodes == "" {
			return "rollout halted: " + s.Reason
		}
		return fmt.Sprintf("rollout halted at %s: %s", nodes, s.Reason)
	case CloseOp:
		return "step closed: " + s.Reason
	}
	return s.String()
}
