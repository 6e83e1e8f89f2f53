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

	status, err := git(ctx, root, "status", "--porcelain")
	if err != nil {
		return s, fmt.Errorf("checking for uncommitted changes: %w", err)
	}
	s.Dirty = status != ""
	return s, nil
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
