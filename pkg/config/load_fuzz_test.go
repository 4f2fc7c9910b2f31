package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// FuzzConfigFile feeds every program's loader a config file, the one input
// a person writes by hand. For each of nico-agent, nico-coordinator and
// nicoctl the file is either refused with errors that each name a key (or
// the file), or loaded into values that pass every key's checks and every
// rule, the same on a second load.
func FuzzConfigFile(f *testing.F) {
	f.Add(`
name: cp-2
roles: [controlPlane, worker]
dataDir: /srv/nico
etcd:
  runtime: exec
  binary: /run/current-system/sw/bin/etcd
  peerURL: https://10.0.0.2:2380
  clientURL: https://10.0.0.2:2379
  endpoints: [https://10.0.0.1:2379, https://10.0.0.3:2379]
  clusterToken: prod
  dialTimeout: 3s
store: {prefix: /nico/test/}
heartbeat: {ttl: 30s}
log: {level: warn, format: json}
`)
	f.Add("name: cp-1\netcd: {endpoints: [http://127.0.0.1:2379]}\n")
	f.Add("endpoints: [http://127.0.0.1:2379]\noutput: yaml\ntimeout: 2s\n")
	f.Add("name: cp-2\netcd: {endpoints: [http://10.0.0.1:2379], dialTimeout: 1s}\ncoordinator: {sessionTTL: 15s, healthTimeout: 500ms}\n")
	f.Add("heartbeat: {ttl: 10}\nbootstrap: 3\nroles: [1, worker]\n")
	f.Add("etcd:\n  peerURLs: http://10.0.0.1:2380\nnmae: cp-1\n")
	f.Add("ETCD:\n  PeerUrl: http://10.0.0.9:2380\n")
	f.Add("name: [unclosed\n")
	f.Add("a: &a [*a, *a]\n")
	f.Add("etcd: 5\n")
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, envPrefix+"_") {
			f.Setenv(k, "")
		}
	}
	f.Fuzz(func(t *testing.T, doc string) {
		path := filepath.Join(t.TempDir(), "nico.yaml")
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		flags := func(add func(*pflag.FlagSet)) *pflag.FlagSet {
			fs := pflag.NewFlagSet("fuzz", pflag.ContinueOnError)
			add(fs)
			if err := fs.Parse([]string{"--config", path}); err != nil {
				t.Fatal(err)
			}
			return fs
		}

		a, err := LoadAgent(flags(AgentFlags))
		checkLoaded(t, "agent", err, func() (any, error) { return LoadAgent(flags(AgentFlags)) }, a, func() ([]key, []rule) {
			var b Agent
			keys, rules := agentKeys(&b)
			b = a
			return keys, rules
		})
		c, err := LoadCoordinator(flags(CoordinatorFlags))
		checkLoaded(t, "coordinator", err, func() (any, error) { return LoadCoordinator(flags(CoordinatorFlags)) }, c, func() ([]key, []rule) {
			var b Coordinator
			keys, rules := coordinatorKeys(&b)
			b = c
			return keys, rules
		})
		l, err := LoadCtl(flags(CtlFlags))
		checkLoaded(t, "ctl", err, func() (any, error) { return LoadCtl(flags(CtlFlags)) }, l, func() ([]key, []rule) {
			var b Ctl
			keys, rules := ctlKeys(&b)
			b = l
			return keys, rules
		})
	})
}

// checkLoaded asserts the properties of one load: got and err are its
// result, reload loads again, bind returns the program's keys bound to a
// copy of got.
func checkLoaded[T any](t *testing.T, program string, err error, reload func() (any, error), got T, bind func() ([]key, []rule)) {
	t.Helper()
	if err != nil {
		for _, e := range leaves(err) {
			var ke *KeyError
			if errors.As(e, &ke) {
				if ke.Key == "" {
					t.Fatalf("%s: KeyError without a key: %v", program, e)
				}
				continue
			}
			if !strings.HasPrefix(e.Error(), "config: ") {
				t.Fatalf("%s: error %q names neither a key nor the config file", program, e)
			}
		}
		return
	}
	keys, rules := bind()
	for _, k := range keys {
		if err := k.check(); err != nil {
			t.Fatalf("%s: loaded %s fails its own check: %v", program, k.name, err)
		}
	}
	for _, r := range rules {
		if err := r.check(); err != nil {
			t.Fatalf("%s: loaded values fail the rule on %v: %v", program, r.keys, err)
		}
	}
	again, err := reload()
	if err != nil {
		t.Fatalf("%s: second load failed: %v", program, err)
	}
	if !reflect.DeepEqual(any(got), again) {
		t.Fatalf("%s: second load differs:\n%+v\n%+v", program, got, again)
	}
}

// leaves flattens errors.Join trees.
func leaves(err error) []error {
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) && joined.(error) == err {
		var out []error
		for _, e := range joined.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}
