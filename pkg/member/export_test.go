package member

// WithoutPublishRestart makes an embedded member behave as etcd alone does
// when it lost its publish: it waits out etcd's request timeout instead of
// restarting. systemdtest's etcd.service runs such a member, so that the
// Systemd runtime's own restart is what the tests see.
func WithoutPublishRestart() Option {
	return func(o *options) { o.keepLostPublish = true }
}
