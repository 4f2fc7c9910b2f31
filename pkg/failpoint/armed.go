//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

func init() {
	armed := strings.Split(os.Getenv(Env), ",")
	Hit = func(name string) {
		if slices.Contains(armed, name) {
			fmt.Fprintf(os.Stderr, "failpoint %s: exiting with status %d\n", name, ExitCode)
			os.Exit(ExitCode)
		}
	}
}
