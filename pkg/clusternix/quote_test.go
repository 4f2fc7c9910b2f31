package clusternix_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/homystack/nico/pkg/clusternix"
)

// hardStrings are the strings Nix's string syntax treats specially.
var hardStrings = []string{
	"", "plain", `say "hi"`, "${builtins.currentTime}", "$${x}", "$", "${", `\${x}`, `\`, `\\`, `back\slash\`,
	"two\nlines\n", "cr\r\ntab\t", "''", "'' ${x} ''", `\n literally`, "ünïcødé ✓", "}", "#", "/* */",
}

// TestQuoteEvaluates: every hard string, quoted, parses and evaluates with
// real nix-instantiate back to itself.
func TestQuoteEvaluates(t *testing.T) {
	requireNixInstantiate(t)
	quoted := make([]string, len(hardStrings))
	for i, s := range hardStrings {
		quoted[i] = clusternix.Quote(s)
	}
	out, err := nixEval(t, "[ "+strings.Join(quoted, " ")+" ]")
	if err != nil {
		t.Fatalf("%v\nexpression: [ %s ]", err, strings.Join(quoted, " "))
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	for i, s := range hardStrings {
		if got[i] != s {
			t.Errorf("Quote(%q) = %s evaluates to %q", s, quoted[i], got[i])
		}
	}
}

// FuzzQuote: any UTF-8 string without NUL (Nix strings cannot hold one),
// quoted, evaluates to itself.
func FuzzQuote(f *testing.F) {
	for _, s := range hardStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
			t.Skip("not a Nix string")
		}
		requireNixInstantiate(t)
		out, err := nixEval(t, clusternix.Quote(s))
		if err != nil {
			t.Fatalf("Quote(%q) = %s: %v", s, clusternix.Quote(s), err)
		}
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if got != s {
			t.Errorf("Quote(%q) = %s evaluates to %q", s, clusternix.Quote(s), got)
		}
	})
}
