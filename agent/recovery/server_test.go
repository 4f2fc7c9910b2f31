package recovery

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/restore"
)

// testServer is a Server on a data dir of the test whose agent "stops"
// by counting; its member runtime is never started here.
func testServer(t *testing.T) (*Server, *int) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "etcd")
	if err := os.MkdirAll(filepath.Join(dir, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	stops := 0
	s := New(Host{Name: "cp-1", DataDir: dir, PeerURL: "https://127.0.0.1:1", ClientURL: "https://127.0.0.1:2",
		Runtime: member.NewEmbedded(), StopAgent: func(context.Context) error { stops++; return nil }})
	return s, &stops
}

// as sends a request as a client whose certificate names cn ("": none).
func as(t *testing.T, s *Server, cn, method, path string, body []byte, header http.Header) (int, string) {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, path, bytes.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	if cn != "" {
		req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Subject: pkix.Name{CommonName: cn}}}}
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	var e restore.APIError
	_ = json.Unmarshal(rec.Body.Bytes(), &e)
	return rec.Code, e.Error
}

func jsonBody(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOnlyTheOperatorMayCall: a node's, a coordinator's or no client
// certificate is refused (403, naming it and what is accepted) and
// changes nothing; the operator's stop holds the host.
func TestOnlyTheOperatorMayCall(t *testing.T) {
	s, stops := testServer(t)
	stop := jsonBody(t, restore.StopRequest{Op: "restore-x"})
	for _, cn := range []string{"", pki.NodeIdentity("cp-1"), pki.CoordinatorIdentity, pki.MemberIdentity("cp-1")} {
		code, msg := as(t, s, cn, http.MethodPost, restore.PathStop, stop, nil)
		if code != http.StatusForbidden || (cn != "" && (!strings.Contains(msg, `"`+cn+`"`) || !strings.Contains(msg, `"root"`))) {
			t.Errorf("stop as %q: %d %q, want 403 naming the certificate and root", cn, code, msg)
		}
	}
	if op, _ := Held(s.host.DataDir); op != "" || *stops != 0 {
		t.Fatalf("after refused calls: held %q, agent stopped %d times; want nothing changed", op, *stops)
	}
	if code, msg := as(t, s, pki.RootIdentity, http.MethodPost, restore.PathStop, stop, nil); code != http.StatusOK {
		t.Fatalf("stop as root: %d %s", code, msg)
	}
	if op, _ := Held(s.host.DataDir); op != "restore-x" || *stops != 1 {
		t.Fatalf("after the operator's stop: held %q, agent stopped %d times", op, *stops)
	}
}

// TestBadInputNamesFieldValueAndAccepted: every refusal names what was
// wrong, its value and what is accepted, and changes nothing.
func TestBadInputNamesFieldValueAndAccepted(t *testing.T) {
	s, _ := testServer(t)
	snap := []byte("not really a snapshot")
	sum := sha256.Sum256(snap)
	good := hex.EncodeToString(sum[:])
	wrong := strings.Repeat("0", 64)
	root := pki.RootIdentity
	for _, tc := range []struct {
		name, method, path string
		body               []byte
		header             http.Header
		code               int
		want               []string
	}{
		{"stop without op", http.MethodPost, restore.PathStop, jsonBody(t, restore.StopRequest{}), nil, 400, []string{"field op is empty", "restore-..."}},
		{"stop, bad op", http.MethodPost, restore.PathStop, jsonBody(t, restore.StopRequest{Op: "../x"}), nil, 400, []string{"field op", `"../x"`, "lower-case letters"}},
		{"not JSON", http.MethodPost, restore.PathServe, []byte("{"), nil, 400, []string{"body"}},
		{"restore before stop", http.MethodPost, restore.PathRestore, jsonBody(t, restore.RestoreRequest{Op: "restore-x", SHA256: good}), nil, 409, []string{"cp-1 is not held", "stop it for restore-x first"}},
		{"upload, bad op", http.MethodPut, restore.PathSnapshot, snap, http.Header{restore.HeaderOp: {"../etc"}, restore.HeaderSHA256: {good}}, 400, []string{restore.HeaderOp, `"../etc"`, "lower-case letters"}},
		{"upload, bad sha", http.MethodPut, restore.PathSnapshot, snap, http.Header{restore.HeaderOp: {"restore-x"}, restore.HeaderSHA256: {"abc"}}, 400, []string{restore.HeaderSHA256, `"abc"`, "64 lower-case hex digits"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := as(t, s, root, tc.method, tc.path, tc.body, tc.header)
			if code != tc.code {
				t.Fatalf("%d %q, want %d", code, msg, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not name %q", msg, w)
				}
			}
		})
	}
	// Held: an upload whose bytes do not hash to the declared sha256 is
	// refused, naming both, and nothing is stored; another operation may
	// not take the host.
	if code, msg := as(t, s, root, http.MethodPost, restore.PathStop, jsonBody(t, restore.StopRequest{Op: "restore-x"}), nil); code != 200 {
		t.Fatal(code, msg)
	}
	code, msg := as(t, s, root, http.MethodPut, restore.PathSnapshot, snap, http.Header{restore.HeaderOp: {"restore-x"}, restore.HeaderSHA256: {wrong}})
	if code != 400 || !strings.Contains(msg, good) || !strings.Contains(msg, wrong) || !strings.Contains(msg, "nothing stored") {
		t.Fatalf("upload with a wrong sha256: %d %q", code, msg)
	}
	if _, err := os.Stat(s.snapshotPath("restore-x")); !os.IsNotExist(err) {
		t.Fatalf("a snapshot with the wrong hash was stored: %v", err)
	}
	code, msg = as(t, s, root, http.MethodPost, restore.PathRestore, jsonBody(t, restore.RestoreRequest{Op: "restore-x", SHA256: good}), nil)
	if code != 400 || !strings.Contains(msg, "no snapshot stored for restore-x") {
		t.Fatalf("restore with no snapshot: %d %q", code, msg)
	}
	code, msg = as(t, s, root, http.MethodPost, restore.PathStop, jsonBody(t, restore.StopRequest{Op: "recover-y"}), nil)
	if code != 409 || !strings.Contains(msg, "restore-x holds cp-1, not recover-y") {
		t.Fatalf("a second operation's stop: %d %q", code, msg)
	}
	code, msg = as(t, s, root, http.MethodPut, restore.PathSnapshot, snap, http.Header{restore.HeaderOp: {"restore-x"}, restore.HeaderSHA256: {good}})
	if code != 200 {
		t.Fatalf("a good upload: %d %q", code, msg)
	}
	// The stored file changed behind the agent's back: refused before use.
	if err := os.WriteFile(s.snapshotPath("restore-x"), []byte("tampered"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, msg = as(t, s, root, http.MethodPost, restore.PathRestore, jsonBody(t, restore.RestoreRequest{Op: "restore-x", SHA256: good}), nil)
	if code != 400 || !strings.Contains(msg, "not "+good) {
		t.Fatalf("restore of a tampered snapshot: %d %q", code, msg)
	}
	if ok, _ := member.HasData(s.host.DataDir); !ok {
		t.Fatal("the data dir was touched by a refused restore")
	}
}
