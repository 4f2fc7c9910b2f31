package failpoint

import "testing"

// TestDefaultBuildIsNoop: without the failpoints tag Hit never exits, even
// with every point armed.
func TestDefaultBuildIsNoop(t *testing.T) {
	t.Setenv("NICO_FAILPOINT", "")
	for _, n := range All {
		Hit(n)
	}
}
