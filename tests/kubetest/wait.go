package kubetest

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// pollInterval is the pause between two probes of a condition.
const pollInterval = 100 * time.Millisecond

// WaitHealthy polls url over TLS (tlsCfg) until it answers 200, within a
// deadline; it returns at once when p exits first. The error names the last
// answer.
func WaitHealthy(ctx context.Context, p *Process, url string, tlsCfg *tls.Config, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tr := &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	cli := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	last := "no answer yet"
	for {
		if exited, _ := p.Exited(); exited {
			return p.exitError(url + " answered")
		}
		err := probe(ctx, cli, url)
		if err == nil {
			return nil
		}
		last = err.Error()
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubetest: %s not healthy at %s within %s: %s; log %s ends:\n%s", p.Name, url, within, last, p.LogPath, p.Tail(1500))
		case <-p.Done():
		case <-time.After(pollInterval): // the pause between two probes
		}
	}
}

// probe GETs url once and wants 200.
func probe(ctx context.Context, cli *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := cli.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s: %s", errNotReady, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
