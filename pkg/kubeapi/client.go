// Package kubeapi is nico's client of a Kubernetes cluster's own API
// server: JSON over HTTPS with a kubeconfig's credential (a client
// certificate or a bearer token), for the few objects the coordinator's
// cluster controller writes and reads: the bootstrap token and the
// node-bootstrapping RBAC bindings (bootstrap.go), the Nodes (nodes.go),
// and a rolling update's cordon, drain and uncordon (drain.go). It is not a general client: each object it writes is
// replaced whole when it differs, and nothing else is touched.
package kubeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Sentinel errors.
var (
	// ErrNotFound: the object does not exist (404).
	ErrNotFound = errors.New("kubeapi: not found")
	// ErrExists: the object exists already (409 on create).
	ErrExists = errors.New("kubeapi: already exists")
	// ErrConflict: the object changed since it was read (409 on update).
	ErrConflict = errors.New("kubeapi: conflict")
	// ErrBadKubeconfig: a kubeconfig lacks a server, a CA or a credential.
	ErrBadKubeconfig = errors.New("kubeapi: bad kubeconfig")
	// ErrTooManyRequests: the API server refused the request for now
	// (429): an eviction a PodDisruptionBudget does not allow yet.
	ErrTooManyRequests = errors.New("kubeapi: refused for now")
)

// Client is one API server's client.
type Client struct {
	// Server is the API server's URL (https://host:port).
	Server string
	// HTTP carries the CA and the client certificate.
	HTTP *http.Client
	// Token, when set, is sent as a bearer token.
	Token string
}

// DefaultTimeout bounds one request of a client made by FromKubeconfig.
const DefaultTimeout = 10 * time.Second

// FromKubeconfig is a client of the current context's cluster and user of
// kubeconfig b: its server, its CA (certificate-authority-data), and its
// client certificate (client-certificate-data, client-key-data) or token.
func FromKubeconfig(b []byte) (*Client, error) {
	k, err := ParseKubeconfig(b)
	if err != nil {
		return nil, err
	}
	if len(k.CertPEM) == 0 && k.Token == "" {
		return nil, fmt.Errorf("%w: user %q: want client-certificate-data and client-key-data, or a token", ErrBadKubeconfig, k.User)
	}
	cfg, err := k.TLS()
	if err != nil {
		return nil, err
	}
	return &Client{Server: k.Server, Token: k.Token, HTTP: &http.Client{Timeout: DefaultTimeout, Transport: &http.Transport{TLSClientConfig: cfg}}}, nil
}

// Close drops the client's idle connections.
func (c *Client) Close() {
	c.HTTP.CloseIdleConnections()
}

// Get reads the object at path (/api/v1/nodes/n1) into out.
func (c *Client) Get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, nil, out)
}

// Create posts obj to the collection at path.
func (c *Client) Create(ctx context.Context, path string, obj any) error {
	return c.do(ctx, http.MethodPost, path, obj, nil)
}

// Update puts obj at path (its metadata.resourceVersion guards it).
func (c *Client) Update(ctx context.Context, path string, obj any) error {
	return c.do(ctx, http.MethodPut, path, obj, nil)
}

// Delete deletes the object at path; one already gone is no error.
func (c *Client) Delete(ctx context.Context, path string) error {
	if err := c.do(ctx, http.MethodDelete, path, nil, nil); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	return c.doType(ctx, method, path, "application/json", in, out)
}

// doType is do with the request body's content type.
func (c *Client) doType(ctx context.Context, method, path, contentType string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("kubeapi: %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.Server, "/")+path, body)
	if err != nil {
		return fmt.Errorf("kubeapi: %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("kubeapi: %s %s%s: %w", method, c.Server, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("kubeapi: %s %s: %w", method, path, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: %s", ErrNotFound, path)
	case resp.StatusCode == http.StatusConflict && method == http.MethodPost:
		return fmt.Errorf("%w: %s", ErrExists, path)
	case resp.StatusCode == http.StatusConflict:
		return fmt.Errorf("%w: %s", ErrConflict, path)
	case resp.StatusCode == http.StatusTooManyRequests:
		return fmt.Errorf("%w: %s %s: %s", ErrTooManyRequests, method, path, message(b))
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("kubeapi: %s %s: %s: %s", method, path, resp.Status, message(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("kubeapi: %s %s: decode: %w", method, path, err)
		}
	}
	return nil
}

// message is a Status's message, else the body's start.
func message(b []byte) string {
	var st struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &st) == nil && st.Message != "" {
		return st.Message
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return strings.TrimSpace(string(b))
}
