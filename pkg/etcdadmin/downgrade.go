package etcdadmin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/homystack/nico/pkg/etcdclient"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// VersionState is the cluster's version as etcd keeps it: the cluster
// version (major.minor.0, the lowest minor every member runs, or a
// downgrade's target once it is enabled) and the downgrade in progress.
type VersionState struct {
	// Cluster is etcd's cluster version, as "3.6.0".
	Cluster string
	// Downgrading: a downgrade is enabled, to DowngradeTarget ("3.6.0").
	Downgrading     bool
	DowngradeTarget string
}

// VersionState asks the member at url for the cluster version (its
// /version endpoint) and the downgrade in progress (its Status).
func (a *Admin) VersionState(ctx context.Context, url string) (VersionState, error) {
	var vs VersionState
	st, err := a.status(ctx, url)
	if err != nil {
		return vs, fmt.Errorf("etcdadmin: status of %s: %w", url, err)
	}
	if d := st.DowngradeInfo; d != nil && d.Enabled {
		vs.Downgrading, vs.DowngradeTarget = true, d.TargetVersion
	}
	if vs.Cluster, err = a.clusterVersion(ctx, url); err != nil {
		return vs, err
	}
	return vs, nil
}

// clusterVersion reads etcdcluster from the member's /version endpoint:
// etcd's gRPC API does not return the cluster version.
func (a *Admin) clusterVersion(ctx context.Context, url string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, a.health())
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/version", nil)
	if err != nil {
		return "", fmt.Errorf("etcdadmin: cluster version from %s: %w", url, err)
	}
	tr := &http.Transport{TLSClientConfig: etcdclient.TLSOf(a.cli)}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", fmt.Errorf("etcdadmin: cluster version from %s: %w", url, err)
	}
	defer resp.Body.Close()
	var v struct {
		Cluster string `json:"etcdcluster"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("etcdadmin: cluster version from %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return "", fmt.Errorf("etcdadmin: cluster version from %s: %w", url, err)
	}
	return v.Cluster, nil
}

// EnableDowngrade asks etcd whether the cluster can downgrade to target's
// minor (downgrade validate) and, if it can, enables the downgrade
// (downgrade enable): etcd lowers the cluster version to that minor, and
// members may then restart on the older binary one at a time. etcd ends
// the downgrade by itself once every member runs the target minor.
func (a *Admin) EnableDowngrade(ctx context.Context, target string) error {
	for _, action := range []clientv3.DowngradeAction{clientv3.DowngradeValidate, clientv3.DowngradeEnable} {
		cctx, cancel := context.WithTimeout(ctx, 5*a.health())
		_, err := a.cli.Downgrade(cctx, action, target)
		cancel()
		if err != nil {
			name := "validate"
			if action == clientv3.DowngradeEnable {
				name = "enable"
			}
			return fmt.Errorf("etcdadmin: downgrade %s %s: %w", name, target, err)
		}
	}
	return nil
}

// CancelDowngrade cancels the downgrade in progress (downgrade cancel):
// etcd restores the cluster version from the members' versions.
func (a *Admin) CancelDowngrade(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 5*a.health())
	defer cancel()
	if _, err := a.cli.Downgrade(cctx, clientv3.DowngradeCancel, ""); err != nil {
		return fmt.Errorf("etcdadmin: downgrade cancel: %w", err)
	}
	return nil
}
