// Command apidocs prints the reference of every API object's fields,
// docs/api.md (`make api-docs`), from pkg/api's Go source: the types, their
// JSON names and doc comments, the values of their enumerated types, and
// the Default: and Validation: lines of the fields' doc comments.
//
// The convention on a field's doc comment: a paragraph line that starts
// with "Default:" gives the value nico uses when the field is left out,
// one that starts with "Validation:" what nicoctl apply (or the object's
// Validate) accepts; the rest is the field's description.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	dir := flag.String("dir", "pkg/api", "the api package's directory")
	nix := flag.Bool("nix-schema", false, "print the schema of the declared specs the NixOS module's options are made from (nixos-module/lib/api-schema.json)")
	flag.Parse()
	pkg, err := parse(*dir)
	switch {
	case err != nil:
	case *nix:
		err = pkg.writeNixSchema(os.Stdout)
	default:
		err = pkg.write(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "apidocs:", err)
		os.Exit(1)
	}
}
