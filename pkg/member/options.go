package member

import (
	"log/slog"
	"time"

	"go.uber.org/zap/zapcore"
)

// DefaultGracePeriod is how long Exec.Stop waits after SIGTERM before SIGKILL.
const DefaultGracePeriod = 10 * time.Second

// Option tunes a Runtime made by NewEmbedded or NewExec.
type Option func(*options)

type options struct {
	tick, election time.Duration
	grace          time.Duration
	extraArgs      []string
	binaries       map[string]string // WithBinaries: etcd version -> binary
	binaryVersion  string            // WithBinaryVersion
	etcdLog        zapcore.Level     // WithEtcdLogLevel; embedded only
	// keepLostPublish: an embedded member that lost its publish waits it
	// out, as etcd alone does (tests' stand-in for etcd.service).
	keepLostPublish bool
}

func newOptions(opts []Option) options {
	o := options{grace: DefaultGracePeriod, etcdLog: zapcore.WarnLevel}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithTimings sets the raft heartbeat interval and election timeout; zero
// keeps etcd's defaults (100ms and 1s). Tests use 50ms and 500ms.
func WithTimings(tick, election time.Duration) Option {
	return func(o *options) { o.tick, o.election = tick, election }
}

// WithGracePeriod sets how long Exec.Stop waits between SIGTERM and SIGKILL.
// Embedded members ignore it: one that does not serve yet stops at once,
// a serving one once etcd's Close returns.
func WithGracePeriod(d time.Duration) Option {
	return func(o *options) { o.grace = d }
}

// WithExtraArgs appends flags to the etcd command line of an Exec member.
// Embedded members ignore it.
func WithExtraArgs(args ...string) Option {
	return func(o *options) { o.extraArgs = append(o.extraArgs, args...) }
}

// WithEtcdLogLevel hands an embedded member's etcd log to the Config's
// logger from level on (default warn; info shows each step of a start or
// a join, as benchmark traces want). Exec members ignore it.
func WithEtcdLogLevel(level slog.Level) Option {
	return func(o *options) {
		switch {
		case level < slog.LevelInfo:
			o.etcdLog = zapcore.DebugLevel
		case level < slog.LevelWarn:
			o.etcdLog = zapcore.InfoLevel
		default:
			o.etcdLog = zapcore.WarnLevel
		}
	}
}
