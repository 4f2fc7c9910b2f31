package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// input is one way of configuring a program: flags, environment and file.
type input struct {
	args []string
	env  map[string]string
	file string // YAML; "" means no file
}

// apply clears NICO_* from the environment, sets in.env, writes in.file and
// returns a parsed flag set made by addFlags.
func (in input) apply(t *testing.T, addFlags func(*pflag.FlagSet)) *pflag.FlagSet {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, envPrefix+"_") {
			t.Setenv(k, "")
		}
	}
	for k, v := range in.env {
		t.Setenv(k, v)
	}
	args := in.args
	if in.file != "" {
		path := filepath.Join(t.TempDir(), "nico.yaml")
		if err := os.WriteFile(path, []byte(in.file), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append([]string{"--config", path}, args...)
	}
	fs := pflag.NewFlagSet(t.Name(), pflag.ContinueOnError)
	addFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return fs
}

func loadAgent(t *testing.T, in input) (Agent, error) {
	t.Helper()
	return LoadAgent(in.apply(t, AgentFlags))
}

// wantErr fails unless err contains every one of wants.
func wantErr(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q\ndoes not contain %q", err, w)
		}
	}
}

// keyErrors returns the keys of the KeyErrors joined in err.
func keyErrors(err error) []string {
	var keys []string
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		for _, e := range joined.Unwrap() {
			keys = append(keys, keyErrors(e)...)
		}
		return keys
	}
	var ke *KeyError
	if errors.As(err, &ke) {
		keys = append(keys, ke.Key)
	}
	return keys
}
