// Command clidocs prints nicoctl's command-line reference, docs/cli.md
// (`make cli-docs`).
package main

import (
	"fmt"
	"os"

	"github.com/homystack/nico/coordinator/cmd/nicoctl/internal/ctl"
)

func main() {
	if err := ctl.WriteReference(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
