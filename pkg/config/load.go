package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

const (
	envPrefix  = "NICO"
	configFlag = "config"
	configEnv  = envPrefix + "_CONFIG"
)

// ErrUnknownKey is wrapped by the KeyError of a key in the config file that
// the program does not know.
var ErrUnknownKey = errors.New("unknown key")

// KeyError is a problem with one key's value.
type KeyError struct {
	Key string // the key, e.g. "etcd.peerURL"
	Err error  // what is wrong and what would be accepted
}

func (e *KeyError) Error() string { return "config: " + e.Key + ": " + e.Err.Error() }

// Unwrap returns e.Err.
func (e *KeyError) Unwrap() error { return e.Err }

// addFlags registers --config and one flag per key.
func addFlags(fs *pflag.FlagSet, keys []key) {
	fs.String(configFlag, "", fmt.Sprintf("read configuration from this YAML file (env %s)", configEnv))
	for _, k := range keys {
		k.addFlag(fs)
	}
}

// load fills the fields the keys are bound to from, in falling precedence,
// the flags of fs that were set, the environment, the config file and the
// defaults; then it checks every key and every rule. fs may be nil or lack
// some flags. All problems are returned together.
func load(fs *pflag.FlagSet, keys []key, rules []rule) error {
	v := viper.New()
	v.SetEnvPrefix(envPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	for _, k := range keys {
		v.SetDefault(k.name, k.def)
		if fs == nil {
			continue
		}
		if f := fs.Lookup(k.name); f != nil {
			if err := v.BindPFlag(k.name, f); err != nil {
				return fmt.Errorf("config: bind flag --%s: %w", k.name, err)
			}
		}
	}
	if path := configPath(fs); path != "" {
		if err := readFile(v, path, keys); err != nil {
			return err
		}
	}

	var errs []error
	bad := map[string]bool{}
	for _, k := range keys {
		err := k.decode(v.Get(k.name))
		if err == nil {
			err = k.check()
		}
		if err != nil {
			bad[k.name] = true
			errs = append(errs, &KeyError{Key: k.name, Err: err})
		}
	}
	for _, r := range rules {
		if slices.ContainsFunc(r.keys, func(k string) bool { return bad[k] }) {
			continue
		}
		if err := r.check(); err != nil {
			errs = append(errs, &KeyError{Key: r.keys[0], Err: err})
		}
	}
	return errors.Join(errs...)
}

// configPath is the file named by --config, else by NICO_CONFIG, else "".
func configPath(fs *pflag.FlagSet) string {
	if fs != nil {
		if f := fs.Lookup(configFlag); f != nil && f.Value.String() != "" {
			return f.Value.String()
		}
	}
	return os.Getenv(configEnv)
}

// readFile merges the YAML file at path into v, refusing keys that are not
// in keys: a typo must not fall back to a default unnoticed.
func readFile(v *viper.Viper, path string, keys []key) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: read config file: %w", err)
	}
	// A viper of the file alone tells which keys the file sets.
	file := viper.New()
	file.SetConfigType("yaml")
	if err := file.ReadConfig(bytes.NewReader(b)); err != nil {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	known := map[string]string{} // lower-cased key, or section, to its spelling
	for _, k := range keys {
		known[strings.ToLower(k.name)] = k.name
		for i, c := range k.name {
			if c == '.' {
				known[strings.ToLower(k.name[:i])] = k.name[:i]
			}
		}
	}
	var errs []error
	for _, fk := range file.AllKeys() {
		if _, ok := known[fk]; ok {
			continue
		}
		msg := fmt.Errorf("%w in %s", ErrUnknownKey, path)
		if s := suggest(fk, keys); s != "" {
			msg = fmt.Errorf("%w in %s; did you mean %s?", ErrUnknownKey, path, s)
		}
		errs = append(errs, &KeyError{Key: fk, Err: msg})
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(b)); err != nil {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	return nil
}

// suggest returns the known key closest to an unknown one, if it is at
// most two edits away.
func suggest(unknown string, keys []key) string {
	best, bestDist := "", 3
	for _, k := range keys {
		if d := editDistance(unknown, strings.ToLower(k.name)); d < bestDist {
			best, bestDist = k.name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// KeyDoc documents one key for help and reference pages.
type KeyDoc struct {
	Key     string // also the flag name, e.g. "etcd.peerURL"
	Env     string // e.g. "NICO_ETCD_PEERURL"
	Default string // as it would be written on the command line
	Help    string
}

// Describe lists the keys of a program: "agent", "coordinator" or "ctl".
// It returns nil for any other name.
func Describe(program string) []KeyDoc {
	var keys []key
	switch program {
	case "agent":
		keys, _ = agentKeys(new(Agent))
	case "coordinator":
		keys, _ = coordinatorKeys(new(Coordinator))
	case "ctl":
		keys, _ = ctlKeys(new(Ctl))
	default:
		return nil
	}
	docs := make([]KeyDoc, len(keys))
	for i, k := range keys {
		docs[i] = KeyDoc{Key: k.name, Env: envName(k.name), Default: fmtDefault(k.def), Help: k.help}
	}
	return docs
}

func fmtDefault(v any) string {
	switch d := v.(type) {
	case []string:
		return strings.Join(d, ",")
	case time.Duration:
		return fmtDuration(d)
	}
	return fmt.Sprint(v)
}
