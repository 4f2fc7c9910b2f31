package member

import "time"

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
}

func newOptions(opts []Option) options {
	o := options{grace: DefaultGracePeriod}
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
// Embedded members ignore it: their Close cannot be cut short.
func WithGracePeriod(d time.Duration) Option {
	return func(o *options) { o.grace = d }
}

// WithExtraArgs appends flags to the etcd command line of an Exec member.
// Embedded members ignore it.
func WithExtraArgs(args ...string) Option {
	return func(o *options) { o.extraArgs = append(o.extraArgs, args...) }
}
