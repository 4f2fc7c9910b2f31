package apply

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/homystack/nico/pkg/api"
)

// Validate checks a spec before anything is fetched or switched.
func Validate(s api.NixosConfigurationSpec) error {
	if !s.Operation.Valid() {
		return fmt.Errorf("%w: operation %q: want switch, boot or test", ErrInvalid, s.Operation)
	}
	if s.ConfigurationSubdir != "" && !inside(s.ConfigurationSubdir) {
		return fmt.Errorf("%w: configurationSubdir %q: want a relative path inside the repository", ErrInvalid, s.ConfigurationSubdir)
	}
	for i, f := range s.AdditionalFiles {
		if f.Path == "" || !inside(f.Path) {
			return fmt.Errorf("%w: additionalFiles[%d].path %q: want a relative path inside the flake", ErrInvalid, i, f.Path)
		}
		if (f.Inline != "") == (f.SecretRef != nil) && !(f.Inline == "" && f.SecretRef == nil) {
			return fmt.Errorf("%w: additionalFiles[%d] (%s): set inline or secretRef, not both", ErrInvalid, i, f.Path)
		}
		if f.SecretRef != nil && (f.SecretRef.Name == "" || f.SecretRef.Key == "") {
			return fmt.Errorf("%w: additionalFiles[%d].secretRef: want name and key", ErrInvalid, i)
		}
	}
	// Structure only: the roots are the applier's (HostFiles.Sync).
	return ValidateHostFiles(s.HostFiles, []string{"/"})
}

// inside tells whether p is relative and stays inside its base directory.
func inside(p string) bool {
	if filepath.IsAbs(p) {
		return false
	}
	c := filepath.Clean(p)
	return c != ".." && !strings.HasPrefix(c, "../")
}
