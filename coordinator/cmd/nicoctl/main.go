// Command nicoctl is the operator's command line for a nico fleet.
package main

import (
	"os"

	"github.com/homystack/nico/coordinator/cmd/nicoctl/internal/ctl"
)

func main() { os.Exit(ctl.Main(os.Args[1:], os.Stdout, os.Stderr)) }
