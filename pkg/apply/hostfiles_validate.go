package apply

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/homystack/nico/pkg/api"
)

// DefaultHostFileRoots are the directories host files may be written
// under when the agent's configuration names none: where Kubernetes
// distributions look for their certificates and tokens, and nico's own.
func DefaultHostFileRoots() []string {
	return []string{"/etc/kubernetes", "/etc/rancher", "/var/lib/nico", "/var/lib/rancher"}
}

// DefaultHostFileMode is a host file's mode when its spec names none.
const DefaultHostFileMode = 0o600

// ValidateHostFiles checks host files against roots (DefaultHostFileRoots
// when nil): every path absolute, clean of ".." elements, strictly under
// a root and listed once; inline or secretRef (name and key); mode octal,
// at most 0777.
func ValidateHostFiles(files []api.HostFile, roots []string) error {
	if roots == nil {
		roots = DefaultHostFileRoots()
	}
	seen := map[string]int{}
	for i, f := range files {
		field := fmt.Sprintf("hostFiles[%d]", i)
		if err := hostPathOK(f.Path, roots); err != nil {
			return fmt.Errorf("%w: %s.path %q: %w", ErrInvalid, field, f.Path, err)
		}
		if j, dup := seen[filepath.Clean(f.Path)]; dup {
			return fmt.Errorf("%w: %s.path %q: already listed as hostFiles[%d]; want each path once", ErrInvalid, field, f.Path, j)
		}
		seen[filepath.Clean(f.Path)] = i
		if f.Inline != "" && f.SecretRef != nil {
			return fmt.Errorf("%w: %s (%s): set inline or secretRef, not both", ErrInvalid, field, f.Path)
		}
		if f.SecretRef != nil && (f.SecretRef.Name == "" || f.SecretRef.Key == "") {
			return fmt.Errorf("%w: %s.secretRef {name: %q, key: %q}: want both name and key", ErrInvalid, field, f.SecretRef.Name, f.SecretRef.Key)
		}
		if _, err := HostFileMode(f); err != nil {
			return fmt.Errorf("%w: %s.mode %q: %w", ErrInvalid, field, f.Mode, err)
		}
		if _, _, err := parseOwner(f.Owner); err != nil {
			return fmt.Errorf("%w: %s.owner %q: %w", ErrInvalid, field, f.Owner, err)
		}
	}
	return nil
}

// HostFileMode is f's permission bits (DefaultHostFileMode when unset).
func HostFileMode(f api.HostFile) (uint32, error) {
	if f.Mode == "" {
		return DefaultHostFileMode, nil
	}
	m, err := strconv.ParseUint(f.Mode, 8, 32)
	if err != nil || m > 0o777 {
		return 0, fmt.Errorf("want octal permission bits from \"0000\" to \"0777\", such as \"0600\"")
	}
	return uint32(m), nil
}

// hostPathOK says why p may not be a host file's path under roots.
func hostPathOK(p string, roots []string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("want an absolute path under one of %s", strings.Join(roots, ", "))
	}
	if slices.Contains(strings.Split(p, "/"), "..") {
		return fmt.Errorf("has a \"..\" element; want an absolute path under one of %s without \"..\"", strings.Join(roots, ", "))
	}
	if underRoot(filepath.Clean(p), roots) == "" {
		return fmt.Errorf("lies outside the allowed roots; want a path under one of %s", strings.Join(roots, ", "))
	}
	return nil
}

// underRoot is the root that clean path p lies strictly under, or "".
func underRoot(p string, roots []string) string {
	for _, r := range roots {
		r = filepath.Clean(r)
		if r == "/" && p != "/" {
			return r
		}
		if strings.HasPrefix(p, r+"/") {
			return r
		}
	}
	return ""
}
