package kubetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Images the workers run without a registry: one static program
// (./testpod) in a one-layer OCI archive per name.
const (
	// PauseImage is the pod sandbox (containerd's sandbox_image).
	PauseImage = "nico.test/pause:1"
	// WebImage is a workload: it prints its pod and node, then waits.
	WebImage = "nico.test/web:1"
)

// BuildImages builds ./testpod (static) and writes PauseImage and
// WebImage as OCI archives into dir; it returns their paths, for
// WorkerConfig.Images.
func BuildImages(ctx context.Context, dir string) ([]string, error) {
	bin := filepath.Join(dir, "testpod")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "github.com/homystack/nico/tests/kubetest/testpod")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("kubetest: build testpod: %w: %s", err, out)
	}
	prog, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	var out []string
	for name, arg := range map[string]string{PauseImage: "pause", WebImage: "web"} {
		p := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(name)+".tar")
		if err := writeOCIArchive(p, name, prog, []string{"/testpod", arg}); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// writeOCIArchive writes an OCI image layout as a tar: one gzipped layer
// holding /testpod, its config (entrypoint), manifest and index, the
// index naming the image in containerd's io.containerd.image.name.
func writeOCIArchive(path, name string, prog []byte, entrypoint []string) error {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: "testpod", Mode: 0o755, Size: int64(len(prog)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	if _, err := tw.Write(prog); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(layer.Bytes()); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	platform := map[string]string{"architecture": runtime.GOARCH, "os": "linux"}
	config, err := json.Marshal(map[string]any{"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{"Entrypoint": entrypoint}, "rootfs": map[string]any{"type": "layers", "diff_ids": []string{digestOf(layer.Bytes())}}})
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	desc := func(mediaType string, b []byte) map[string]any {
		return map[string]any{"mediaType": mediaType, "digest": digestOf(b), "size": len(b)}
	}
	manifest, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": desc("application/vnd.oci.image.config.v1+json", config),
		"layers": []any{desc("application/vnd.oci.image.layer.v1.tar+gzip", gz.Bytes())}})
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	md := desc("application/vnd.oci.image.manifest.v1+json", manifest)
	md["platform"] = platform
	md["annotations"] = map[string]string{"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name[strings.LastIndexByte(name, ':')+1:]}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []any{md}})
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	var out bytes.Buffer
	aw := tar.NewWriter(&out)
	files := []struct {
		name string
		body []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)}, {"index.json", index},
		{blobPath(config), config}, {blobPath(manifest), manifest}, {blobPath(gz.Bytes()), gz.Bytes()},
	}
	for _, f := range files {
		if err := aw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return fmt.Errorf("kubetest: %w", err)
		}
		if _, err := aw.Write(f.body); err != nil {
			return fmt.Errorf("kubetest: %w", err)
		}
	}
	if err := aw.Close(); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	return nil
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func blobPath(b []byte) string {
	return "blobs/sha256/" + strings.TrimPrefix(digestOf(b), "sha256:")
}

// importImages imports the archives into the k8s.io namespace of the
// containerd at sock (the CRI's), unpacked for the native snapshotter,
// once containerd answers (within a deadline; it returns at once when
// containerd exits first).
func importImages(ctx context.Context, containerd *Process, sock string, archives []string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ctr := func(args ...string) ([]byte, error) {
		return exec.CommandContext(ctx, "ctr", append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	}
	for {
		out, err := ctr("version")
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubetest: containerd at %s does not answer: %v: %s", sock, err, out)
		case <-containerd.Done():
			return containerd.exitError("its socket answered")
		case <-time.After(pollInterval): // the pause between two probes
		}
	}
	for _, a := range archives {
		if out, err := ctr("images", "import", "--snapshotter", "native", a); err != nil {
			return fmt.Errorf("kubetest: import %s: %w: %s", a, err, out)
		}
	}
	return nil
}
