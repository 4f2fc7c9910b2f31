// Package logging builds the structured slog loggers of nico's programs from
// a level and a format, and gives tests a logger that writes to t.Log.
package logging

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Levels lists the accepted level names, lowest first.
var Levels = []string{"debug", "info", "warn", "error"}

// Formats lists the accepted output formats.
var Formats = []string{"text", "json"}

// New returns a logger writing to w at level (debug, info, warn, error) in
// format (text, json). Bad values are reported together, each named.
func New(w io.Writer, level, format string) (*slog.Logger, error) {
	lvl, lerr := ParseLevel(level)
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	var ferr error
	switch format {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		ferr = fmt.Errorf("logging: format %q is not accepted; use one of %s", format, strings.Join(Formats, ", "))
	}
	if lerr != nil || ferr != nil {
		return nil, errors.Join(lerr, ferr)
	}
	return slog.New(h), nil
}

// ParseLevel maps a level name (debug, info, warn, error) to its slog.Level.
func ParseLevel(level string) (slog.Level, error) {
	switch level {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return slog.LevelInfo, fmt.Errorf("logging: level %q is not accepted; use one of %s", level, strings.Join(Levels, ", "))
}
