package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// key is one configuration key of a program: its name (also its flag), its
// default, its help text, and how to decode and check the value it is bound
// to.
type key struct {
	name      string
	shorthand string // optional one-letter flag
	help      string
	def       any // string, bool, time.Duration or []string

	decode func(raw any) error // stores the raw value in the field
	check  func() error        // validates the field
}

// rule checks a combination of keys. It runs only when each of its keys
// decoded and passed its own checks, and its error is reported on keys[0].
type rule struct {
	keys  []string
	check func() error
}

// field makes a key bound to *p. parse turns a raw value from viper into a
// T; checks run in order on the result and the first failure is reported.
func field[T any](name string, p *T, def T, help string, parse func(any) (T, error), checks ...func(T) error) key {
	return key{
		name: name,
		help: help,
		def:  def,
		decode: func(raw any) error {
			v, err := parse(raw)
			if err != nil {
				return err
			}
			*p = v
			return nil
		},
		check: func() error {
			for _, c := range checks {
				if err := c(*p); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func stringKey(name string, p *string, def, help string, checks ...func(string) error) key {
	return field(name, p, def, help, parseString, checks...)
}

func boolKey(name string, p *bool, def bool, help string) key {
	return field(name, p, def, help, parseBool)
}

func durationKey(name string, p *time.Duration, def time.Duration, help string, checks ...func(time.Duration) error) key {
	return field(name, p, def, help, parseDuration, checks...)
}

func intKey(name string, p *int, def int, help string, checks ...func(int) error) key {
	return field(name, p, def, help, parseInt, checks...)
}

func listKey(name string, p *[]string, def []string, help string, checks ...func([]string) error) key {
	return field(name, p, def, help, parseList, checks...)
}

// addFlag registers k on fs as a flag of k's type, named exactly k.name.
func (k key) addFlag(fs *pflag.FlagSet) {
	help := fmt.Sprintf("%s (env %s)", k.help, envName(k.name))
	switch def := k.def.(type) {
	case string:
		fs.StringP(k.name, k.shorthand, def, help)
	case bool:
		fs.BoolP(k.name, k.shorthand, def, help)
	case time.Duration:
		fs.DurationP(k.name, k.shorthand, def, help)
	case int:
		fs.IntP(k.name, k.shorthand, def, help)
	case []string:
		fs.StringSliceP(k.name, k.shorthand, def, help)
	default:
		panic(fmt.Sprintf("config: key %s has a default of unsupported type %T", k.name, k.def))
	}
}

// envName is the environment variable of a key: NICO_ETCD_PEERURL for
// etcd.peerURL.
func envName(key string) string {
	return envPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// The parsers accept what viper hands over from each source: typed values
// from defaults, flags and YAML, and strings from the environment.

func parseString(raw any) (string, error) {
	switch v := raw.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case bool, int, int64, uint64, float64:
		return fmt.Sprint(v), nil
	}
	return "", fmt.Errorf("%v is not accepted; use a string", raw)
}

func parseBool(raw any) (bool, error) {
	switch v := raw.(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	case string:
		b, err := strconv.ParseBool(v)
		if err == nil {
			return b, nil
		}
	}
	return false, fmt.Errorf("%s is not accepted; use true or false", quote(raw))
}

func parseDuration(raw any) (time.Duration, error) {
	switch v := raw.(type) {
	case time.Duration:
		return v, nil
	case string:
		d, err := time.ParseDuration(v)
		if err == nil {
			return d, nil
		}
	}
	return 0, fmt.Errorf("%s is not accepted; use a duration with a unit, e.g. 10s or 2m", quote(raw))
}

func parseInt(raw any) (int, error) {
	switch v := raw.(type) {
	case int:
		return v, nil
	case int64:
		return int(v), nil
	case uint64:
		return int(v), nil
	case float64:
		if v == float64(int(v)) {
			return int(v), nil
		}
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%s is not accepted; use a whole number", quote(raw))
}

func parseList(raw any) ([]string, error) {
	switch v := raw.(type) {
	case nil:
		return nil, nil
	case []string:
		return v, nil
	case string:
		var out []string
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out, nil
	case []any:
		out := make([]string, 0, len(v))
		var errs []error
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				errs = append(errs, fmt.Errorf("item %v is not accepted; use a list of strings", e))
				continue
			}
			out = append(out, s)
		}
		return out, errors.Join(errs...)
	}
	return nil, fmt.Errorf("%v is not accepted; use a list of strings", raw)
}

// quote shows a value in an error: strings quoted, anything else as is.
func quote(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}
