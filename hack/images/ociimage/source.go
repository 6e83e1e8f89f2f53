package ociimage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// source is what the images record about the checkout they are built from.
type source struct {
	// Tag is the chart's appVersion.
	Tag string
	// Revision is the commit (HEAD).
	Revision string
	// Created is the commit time, or SOURCE_DATE_EPOCH; it stamps the image
	// config and every tar header.
	Created time.Time
	// Dirty reports uncommitted changes, which the binaries contain but the
	// revision does not name.
	Dirty bool
}

// tagPattern is the tag grammar of the OCI distribution spec.
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)

var revisionPattern = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

func readSource(ctx context.Context, root, sourceDateEpoch string) (source, error) {
	var s source
	var err error
	if s.Tag, err = chartAppVersion(filepath.Join(root, ChartFile)); err != nil {
		return s, err
	}
	rev, err := git(ctx, root, "rev-parse", "HEAD")
	if err != nil {
		return s, fmt.Errorf("reading the commit: %w", err)
	}
	if !revisionPattern.MatchString(rev) {
		return s, fmt.Errorf("reading the commit: git rev-parse HEAD printed %q", rev)
	}
	s.Revision = rev

	epoch := sourceDateEpoch
	if epoch == "" {
		if epoch, err = git(ctx, root, "log", "-1", "--format=%ct"); err != nil {
			return s, fmt.Errorf("reading the commit time: %w", err)
		}
	}
	if s.Created, err = parseEpoch(epoch); err != nil {
		return s, err
	}

	changes, err := treeChanges(ctx, root)
	if err != nil {
		return s, err
	}
	s.Dirty = len(changes) > 0
	return s, nil
}

// DirtyTreeError is a working tree that differs from its commit.
type DirtyTreeError struct {
	Root string
	// Paths are what differs, as git status names them: tracked files with
	// changes (staged or not), and untracked files that are not ignored
	// (suffixed " (untracked)").
	Paths []string
}

// dirtyPathsShown is how many paths the error names; the rest are counted.
const dirtyPathsShown = 5

func (e *DirtyTreeError) Error() string {
	shown := e.Paths[:min(len(e.Paths), dirtyPathsShown)]
	list := strings.Join(shown, ", ")
	if more := len(e.Paths) - len(shown); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return fmt.Sprintf("the working tree %s has uncommitted changes: %s; commit or stash them (git stash --include-untracked), since a release is labelled with the commit and must be built from it alone", e.Root, list)
}

// CleanRevision is the commit checked out at root, or a *DirtyTreeError if
// the working tree differs from it.
func CleanRevision(ctx context.Context, root string) (string, error) {
	changes, err := treeChanges(ctx, root)
	if err != nil {
		return "", err
	}
	if len(changes) > 0 {
		return "", &DirtyTreeError{Root: root, Paths: changes}
	}
	rev, err := git(ctx, root, "rev-parse", "HEAD")
	if err != nil {
		return "", fmt.Errorf("reading the commit: %w", err)
	}
	if !revisionPattern.MatchString(rev) {
		return "", fmt.Errorf("reading the commit: git rev-parse HEAD printed %q", rev)
	}
	return rev, nil
}

// treeChanges lists what git status reports at root. Untracked files are
// asked for explicitly, as status.showUntrackedFiles=no would hide them;
// ignored files are not listed. It runs git itself because git() trims the
// output, and with it the first entry's leading status column.
func treeChanges(ctx context.Context, root string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "git", "status", "--porcelain", "-z", "--untracked-files=normal")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, errors.New("git is not installed; make images needs a git checkout")
		}
		return nil, fmt.Errorf("checking %s for uncommitted changes: git status: %w", root, commandError(err))
	}
	// -z: "XY PATH", NUL-terminated, with a rename's or copy's origin as
	// the next field; paths are not quoted.
	var changes []string
	fields := strings.Split(string(out), "\x00")
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if len(f) < 4 {
			continue
		}
		code, path := f[:2], f[3:]
		switch {
		case code == "??":
			path += " (untracked)"
		case code[0] == 'R' || code[0] == 'C':
			i++
		}
		changes = append(changes, path)
	}
	return changes, nil
}

// chartAppVersion reads appVersion from a Chart.yaml.
func chartAppVersion(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the image tag: %w", err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		return "", fmt.Errorf("reading the image tag from %s: %w", path, err)
	}
	if chart.AppVersion == "" {
		return "", fmt.Errorf("reading the image tag: %s has no appVersion", path)
	}
	if !tagPattern.MatchString(chart.AppVersion) {
		return "", fmt.Errorf("reading the image tag: appVersion %q in %s is not a valid image tag", chart.AppVersion, path)
	}
	return chart.AppVersion, nil
}

// parseEpoch reads Unix seconds, as SOURCE_DATE_EPOCH and git's %ct give them.
func parseEpoch(s string) (time.Time, error) {
	sec, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	// The upper bound keeps the time inside what a ustar header can hold.
	if err != nil || sec < 0 || sec >= 1<<33 {
		return time.Time{}, fmt.Errorf("created time %q: want non-negative Unix seconds (SOURCE_DATE_EPOCH)", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", errors.New("git is not installed; make images needs a git checkout")
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), commandError(err))
	}
	return strings.TrimSpace(string(out)), nil
}
