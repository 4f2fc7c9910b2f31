package snapshottest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/snapshot"
)

// Env variables read by WeedBinary.
const (
	// envWeed names SeaweedFS's weed binary (tests/weedbin/build.sh).
	envWeed = "NICO_WEED_BINARY"
	// envRequireWeed set to 1 turns a missing binary into a failure.
	envRequireWeed = "NICO_REQUIRE_WEED"
)

// WeedBinary returns the weed binary from NICO_WEED_BINARY or
// .cache/weed/weed under the repository root; it skips the test when
// there is none (fails it when NICO_REQUIRE_WEED=1).
func WeedBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv(envWeed)
	if p == "" {
		if dir, err := os.Getwd(); err == nil {
			for ; ; dir = filepath.Dir(dir) {
				if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
					p = filepath.Join(dir, ".cache", "weed", "weed")
					break
				}
				if filepath.Dir(dir) == dir {
					break
				}
			}
		}
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() {
		msg := fmt.Sprintf("no SeaweedFS weed binary at %q (set %s, or run make weed-binary)", p, envWeed)
		if os.Getenv(envRequireWeed) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// WeedServer is a real SeaweedFS (master, volume, filer and S3 gateway in
// one `weed server` process) on 127.0.0.1 ports, for the S3 store's
// contract test.
type WeedServer struct {
	// Endpoint is the S3 gateway's host:port.
	Endpoint string
	// Creds are the gateway's keys.
	Creds snapshot.S3Credentials
}

// StartWeed starts weed server in t.TempDir() and waits until its S3
// gateway creates a bucket; the process is stopped when the test ends.
func StartWeed(t *testing.T) *WeedServer {
	t.Helper()
	bin := WeedBinary(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	w := &WeedServer{Creds: snapshot.S3Credentials{AccessKey: "nicotest", SecretKey: "nicotest-secret"}}
	conf := fmt.Sprintf(`{"identities":[{"name":"nico","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","Write","List","Tagging"]}]}`, w.Creds.AccessKey, w.Creds.SecretKey)
	confPath := filepath.Join(dir, "s3.json")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	port := func() string { return strconv.Itoa(etcdtest.FreePort(t)) }
	s3Port := port()
	w.Endpoint = "127.0.0.1:" + s3Port
	args := []string{"server", "-dir=" + data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port=" + port(), "-master.port.grpc=" + port(), "-master.volumeSizeLimitMB=64",
		"-volume.port=" + port(), "-volume.port.grpc=" + port(), "-volume.max=4", "-volume.preStopSeconds=0",
		"-filer", "-filer.port=" + port(), "-filer.port.grpc=" + port(),
		"-s3", "-s3.port=" + s3Port, "-s3.port.grpc=" + port(), "-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.config=" + confPath}
	logPath := filepath.Join(dir, "weed.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start weed: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	st := w.Store(t, "ready", "")
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := st.EnsureBucket(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("weed S3 gateway at %s made no bucket within 90s: %v\n%s", w.Endpoint, err, tail(b))
		}
		// Until the next try of the gateway, or the process's exit.
		select {
		case werr := <-done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("weed exited (%v) before its S3 gateway answered: %s", werr, tail(b))
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Logf("weed server ready at %s after %v", w.Endpoint, time.Since(start).Round(time.Millisecond))
	return w
}

// Store returns an S3 store of bucket (made) with prefix.
func (w *WeedServer) Store(t *testing.T, bucket, prefix string) *snapshot.S3Store {
	t.Helper()
	st, err := snapshot.NewS3Store(snapshot.S3Config{Endpoint: w.Endpoint, Bucket: bucket, Prefix: prefix, Insecure: true, Credentials: w.Creds})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// tail is the end of a log, for a failure message.
func tail(b []byte) string {
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}
