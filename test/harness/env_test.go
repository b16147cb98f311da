package harness

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestLogDirInUseByAnother: a log folder is another run's while the
// process named in its owner file lives; this process's own, a dead
// process's or an unowned folder may be cleared.
func TestLogDirInUseByAnother(t *testing.T) {
	dir := t.TempDir()
	if inUseByAnother(dir) {
		t.Error("a folder without an owner file is in use")
	}
	for pid, want := range map[int]bool{os.Getpid(): false, os.Getppid(): true, 1 << 22: false} {
		if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := inUseByAnother(dir); got != want {
			t.Errorf("owner pid %d: in use by another %v, want %v", pid, got, want)
		}
	}
}
