package restore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/member"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// AgentFleet is a Fleet driven through each control-plane host's own
// agent (its recovery API, agent/recovery): nothing needs every data dir on
// one host, and nothing needs etcd before the new cluster serves.
type AgentFleet struct {
	// Agents maps each node to its agent's recovery API (host:port).
	Agents map[string]string
	// TLS is the operator's identity to the agents: the fleet CA and a
	// client certificate whose Common Name is pki.RootIdentity.
	TLS *tls.Config
	// ClientTLS is the identity to the new cluster's members (Client).
	ClientTLS *tls.Config
	// Op is the operation's ID (the Journal's): every call names it.
	Op string
	// ClusterToken is the new cluster's initial-cluster token.
	ClusterToken string

	once sync.Once
	http *http.Client

	mu     sync.Mutex
	urls   map[string]string // node -> client URL, from the surveys
	served []string          // nodes whose member serves the new cluster
}

func (f *AgentFleet) client() *http.Client {
	f.once.Do(func() {
		f.http = &http.Client{Transport: &http.Transport{TLSClientConfig: f.TLS, TLSHandshakeTimeout: 5 * time.Second}}
	})
	return f.http
}

func (f *AgentFleet) addr(node string) (string, error) {
	a, ok := f.Agents[node]
	if !ok {
		return "", fmt.Errorf("%w: node %q has no agent (agents: %s)", ErrNotMember, node, strings.Join(AgentNames(f.Agents), ", "))
	}
	return a, nil
}

// AgentNames are the nodes of agents, sorted.
func AgentNames(agents map[string]string) []string {
	out := make([]string, 0, len(agents))
	for n := range agents {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// do calls node's agent: body is JSON (or an io.Reader sent as it is),
// the answer decoded into out when not nil.
func (f *AgentFleet) do(ctx context.Context, node, method, path string, body any, header http.Header, out any) error {
	addr, err := f.addr(node)
	if err != nil {
		return err
	}
	return callAgent(ctx, f.client(), addr, method, path, body, header, out)
}

func callAgent(ctx context.Context, c *http.Client, addr, method, path string, body any, header http.Header, out any) error {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case io.Reader:
		rd = b
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return fmt.Errorf("restore: encode %s: %w", path, err)
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequestWithContext(ctx, method, "https://"+addr+path, rd)
	if err != nil {
		return fmt.Errorf("restore: agent %s: %w", addr, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("restore: agent %s %s: %w", addr, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var e APIError
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(raw, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(raw))
		}
		if resp.StatusCode/100 == 4 {
			return fmt.Errorf("%w: %s %s: %s: %s", ErrAgentRefused, addr, path, resp.Status, e.Error)
		}
		return fmt.Errorf("restore: agent %s %s: %s: %s", addr, path, resp.Status, e.Error)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("restore: agent %s %s: decode: %w", addr, path, err)
	}
	return nil
}

// Survey asks every agent for its host's state, side by side; an agent
// that does not answer is listed with its error. Sorted by node.
func (f *AgentFleet) Survey(ctx context.Context, timeout time.Duration) []HostState {
	names := AgentNames(f.Agents)
	out := make([]HostState, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			var h HostState
			if err := f.do(sctx, n, http.MethodGet, PathSurvey, nil, nil, &h); err != nil {
				h = HostState{Node: n, Err: "agent: " + err.Error()}
			}
			if h.Node != n && h.Err == "" {
				h.Err = fmt.Sprintf("the agent at %s is node %q, not %q", f.Agents[n], h.Node, n)
			}
			h.Node = n
			out[i] = h
		})
	}
	wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.urls == nil {
		f.urls = map[string]string{}
	}
	for _, h := range out {
		if h.ClientURL != "" {
			f.urls[h.Node] = h.ClientURL
		}
	}
	return out
}

// Stop implements Fleet.
func (f *AgentFleet) Stop(ctx context.Context, node string, fence *member.Fence) error {
	return f.do(ctx, node, http.MethodPost, PathStop, StopRequest{Op: f.Op, Fence: fence}, nil, nil)
}

// Restore implements Fleet: the snapshot is streamed to node's agent,
// which checks its sha256 before it restores it.
func (f *AgentFleet) Restore(ctx context.Context, node, snap string, bump uint64) error {
	sum, err := fileSHA256(snap)
	if err != nil {
		return err
	}
	fh, err := os.Open(snap)
	if err != nil {
		return fmt.Errorf("restore: open the snapshot: %w", err)
	}
	defer fh.Close()
	h := http.Header{HeaderOp: {f.Op}, HeaderSHA256: {sum}}
	if err := f.do(ctx, node, http.MethodPut, PathSnapshot, fh, h, nil); err != nil {
		return fmt.Errorf("restore: upload the snapshot to %s: %w", node, err)
	}
	return f.do(ctx, node, http.MethodPost, PathRestore, RestoreRequest{Op: f.Op, SHA256: sum, BumpRevision: bump, ClusterToken: f.ClusterToken}, nil, nil)
}

func fileSHA256(path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("restore: open the snapshot: %w", err)
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return "", fmt.Errorf("restore: hash the snapshot %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Serve implements Fleet.
func (f *AgentFleet) Serve(ctx context.Context, node string, hold *FirstHold) (uint64, error) {
	var resp ServeResponse
	req := ServeRequest{Op: f.Op, Force: hold != nil, Hold: hold, ClusterToken: f.ClusterToken}
	if err := f.do(ctx, node, http.MethodPost, PathServe, req, nil, &resp); err != nil {
		return 0, err
	}
	f.serves(node)
	return resp.ClusterID, nil
}

func (f *AgentFleet) serves(node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.served, node) {
		f.served = append(f.served, node)
	}
}

// endpoints are the client URLs of the members that serve the new cluster.
func (f *AgentFleet) endpoints(ctx context.Context) ([]string, error) {
	f.mu.Lock()
	missing := f.urls == nil
	f.mu.Unlock()
	if missing {
		f.Survey(ctx, 5*time.Second)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var eps []string
	for _, n := range f.served {
		if u := f.urls[n]; u != "" {
			eps = append(eps, u)
		}
	}
	if len(eps) == 0 {
		return nil, errors.New("restore: no member serves the new cluster yet")
	}
	return eps, nil
}

// Rejoin implements Fleet: node's agent wipes its data dir and joins the
// members that serve as a learner.
func (f *AgentFleet) Rejoin(ctx context.Context, node string) error {
	eps, err := f.endpoints(ctx)
	if err != nil {
		return err
	}
	if err := f.do(ctx, node, http.MethodPost, PathRejoin, RejoinRequest{Op: f.Op, Endpoints: eps, ClusterToken: f.ClusterToken}, nil, nil); err != nil {
		return err
	}
	f.serves(node)
	return nil
}

// Client implements Fleet.
func (f *AgentFleet) Client(ctx context.Context) (*clientv3.Client, error) {
	eps, err := f.endpoints(ctx)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, TLS: f.ClientTLS, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("restore: dial %v: %w", eps, err)
	}
	return cli, nil
}

// Release hands every host back to its agent, one at a time, each once
// its agent serves the member again (within wait each), so that the
// cluster keeps its quorum; an agent that answers its survey held by no
// operation is released already.
func (f *AgentFleet) Release(ctx context.Context, wait time.Duration) error {
	return f.release(ctx, wait, false)
}

// Abandon hands every host back like Release, first removing the fences
// the operation wrote: for an operation still at its first step, whose old
// cluster is then whole again.
func (f *AgentFleet) Abandon(ctx context.Context, wait time.Duration) error {
	return f.release(ctx, wait, true)
}

func (f *AgentFleet) release(ctx context.Context, wait time.Duration, unfence bool) error {
	for _, n := range AgentNames(f.Agents) {
		if err := f.do(ctx, n, http.MethodPost, PathRelease, ReleaseRequest{Op: f.Op, Unfence: unfence}, nil, nil); err != nil {
			return fmt.Errorf("release %s: %w", n, err)
		}
		if err := f.awaitAgent(ctx, n, wait); err != nil {
			return err
		}
	}
	return nil
}

// awaitAgent waits until node's agent serves its member again.
func (f *AgentFleet) awaitAgent(ctx context.Context, node string, wait time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		var h HostState
		err := f.do(wctx, node, http.MethodGet, PathSurvey, nil, nil, &h)
		switch {
		case err != nil:
			last = err.Error()
		case h.Held == "" && h.Serving:
			return nil
		default:
			last = fmt.Sprintf("held %q, serving %v %s", h.Held, h.Serving, h.Err)
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("restore: %s's agent does not serve its member within %s of its release (last: %s): %w", node, wait, last, wctx.Err())
		case <-tick.C:
		}
	}
}

// Close drops the idle connections to the agents.
func (f *AgentFleet) Close() {
	if f.http != nil {
		f.http.CloseIdleConnections()
	}
}
