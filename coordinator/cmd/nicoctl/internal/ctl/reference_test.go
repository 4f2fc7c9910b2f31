package ctl

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestReferenceUpToDate: docs/cli.md is what nicoctl's help texts generate;
// run `make cli-docs` after changing a command.
func TestReferenceUpToDate(t *testing.T) {
	var want bytes.Buffer
	if err := WriteReference(&want); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatalf("%v (run make cli-docs)", err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("docs/cli.md differs from nicoctl's help texts: run make cli-docs")
	}
}
