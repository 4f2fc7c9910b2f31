package member

import (
	"strconv"
	"strings"
)

// childEnv drops NOTIFY_SOCKET: etcd sends READY=1 to systemd when it is
// set, which would report the agent's own unit ready on the child's behalf.
func childEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "NOTIFY_SOCKET=") {
			out = append(out, kv)
		}
	}
	return out
}

func execArgs(cfg Config, opts options) []string {
	args := []string{
		"--name=" + cfg.Name,
		"--data-dir=" + cfg.DataDir,
		"--listen-peer-urls=" + cfg.PeerURL,
		"--initial-advertise-peer-urls=" + cfg.PeerURL,
		"--listen-client-urls=" + cfg.ClientURL,
		"--advertise-client-urls=" + cfg.ClientURL,
		"--initial-cluster=" + cfg.InitialCluster,
		"--initial-cluster-state=" + cfg.ClusterState,
		"--log-outputs=stderr",
	}
	if cfg.ForceNewCluster {
		args = append(args, "--force-new-cluster")
	}
	if cfg.ClusterToken != "" {
		args = append(args, "--initial-cluster-token="+cfg.ClusterToken)
	}
	if cfg.QuotaBackendBytes > 0 {
		args = append(args, "--quota-backend-bytes="+strconv.FormatInt(cfg.QuotaBackendBytes, 10))
	}
	if cfg.TLS != nil {
		args = append(args, cfg.TLS.flags()...)
	}
	if opts.tick > 0 {
		args = append(args, "--heartbeat-interval="+strconv.FormatInt(opts.tick.Milliseconds(), 10))
	}
	if opts.election > 0 {
		args = append(args, "--election-timeout="+strconv.FormatInt(opts.election.Milliseconds(), 10))
	}
	return append(args, opts.extraArgs...)
}
