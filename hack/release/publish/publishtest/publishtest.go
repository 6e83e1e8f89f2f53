// Package publishtest holds what the tests of a release share: a
// committed snapshot of the working tree to release, and git with a fixed
// identity. Publish refuses a dirty tree, and the checkout under test is
// dirty while it is being worked on; the snapshot is the same code, clean.
package publishtest

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Git runs git in dir and returns its output.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "git", args...)
	cmd.Dir = dir
	// A fixed identity and date: the host's git configuration may have
	// neither, and the same tree then gives the same commit.
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=glance-operator test", "GIT_AUTHOR_EMAIL=test@example.invalid", "GIT_AUTHOR_DATE=@1700000000 +0000",
		"GIT_COMMITTER_NAME=glance-operator test", "GIT_COMMITTER_EMAIL=test@example.invalid", "GIT_COMMITTER_DATE=@1700000000 +0000")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return string(out)
}

// CommitAll makes dir a git repository with everything in it committed.
func CommitAll(t testing.TB, dir string) {
	t.Helper()
	Git(t, dir, "init", "--quiet")
	Git(t, dir, "add", "--all")
	Git(t, dir, "-c", "commit.gpgsign=false", "commit", "--quiet", "--no-verify", "--message=snapshot")
}

// Snapshot copies the working tree of the git checkout at src as it is,
// uncommitted changes and untracked files but not ignored ones, into a new
// repository and commits it there; it returns the new repository.
func Snapshot(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	files := Git(t, src, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	for rel := range strings.SplitSeq(strings.TrimSuffix(files, "\x00"), "\x00") {
		from, to := filepath.Join(src, rel), filepath.Join(dst, rel)
		info, err := os.Lstat(from)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(from)
			if err == nil {
				err = os.Symlink(target, to)
			}
			if err != nil {
				t.Fatal(err)
			}
		case info.Mode().IsRegular():
			b, err := os.ReadFile(from)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(to, b, info.Mode().Perm()); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: %s is neither a file nor a symbolic link", from, info.Mode())
		}
	}
	CommitAll(t, dst)
	return dst
}
