package restore

import (
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// envJournalChild marks the re-run of TestJournalSaveReportsAFailedWrite
// under a file size limit.
const envJournalChild = "NICO_RESTORE_JOURNAL_CHILD"

// TestJournalSaveReportsAFailedWrite saves a journal in a process whose
// file size limit (RLIMIT_FSIZE, set by prlimit) is smaller than the
// journal: the write fails, and Save must say so rather than rename a
// truncated file over the journal.
func TestJournalSaveReportsAFailedWrite(t *testing.T) {
	t.Parallel()
	if dir := os.Getenv(envJournalChild); dir != "" {
		signal.Ignore(syscall.SIGXFSZ) // the write returns EFBIG instead
		f := FileJournal{Path: filepath.Join(dir, "journal.json")}
		err := f.Save(&Journal{ID: "r-1", Kind: KindRestore, Target: "cp-1", Others: []string{"cp-2", "cp-3"}})
		if err == nil {
			t.Fatal("Save reported success though the write was cut by the file size limit")
		}
		if !strings.Contains(err.Error(), "write journal") {
			t.Fatalf("Save: %v; want the failed write named", err)
		}
		if _, serr := os.Stat(f.Path); !os.IsNotExist(serr) {
			t.Fatalf("a journal was left at %s after a failed write (stat: %v)", f.Path, serr)
		}
		return
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) is not installed")
	}
	dir := t.TempDir()
	cmd := exec.Command(prlimit, "--fsize=16", os.Args[0], "-test.run", "^TestJournalSaveReportsAFailedWrite$", "-test.v")
	cmd.Env = append(os.Environ(), envJournalChild+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child under a 16-byte file size limit failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestJournalSaveReportsAFailedWrite") {
		t.Fatalf("the child ran no test:\n%s", out)
	}
}
