package main

import (
	"context"
	"fmt"
	"time"

	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/member"
)

// newExec is the exec runtime over etcd.binary and, when etcd.binaries
// lists more, every binary by the version it reports: the etcd versions
// this node can be rolled to (EtcdCluster spec.version).
func newExec(c config.Etcd) (*member.Exec, error) {
	if len(c.Binaries) == 0 {
		return member.NewExec(c.Binary), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	def, err := member.BinaryVersion(ctx, c.Binary)
	if err != nil {
		return nil, fmt.Errorf("etcd.binary: %w", err)
	}
	byVersion, err := member.BinariesByVersion(ctx, c.Binaries)
	if err != nil {
		return nil, fmt.Errorf("etcd.binaries: %w", err)
	}
	if _, ok := byVersion[def]; !ok {
		byVersion[def] = c.Binary
	}
	return member.NewExec(c.Binary, member.WithBinaries(byVersion), member.WithBinaryVersion(def)), nil
}
