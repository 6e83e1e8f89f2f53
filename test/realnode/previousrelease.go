package realnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/c5c3/glance-operator/hack/release/publish"
	"github.com/c5c3/glance-operator/test/controlplane"
)

// PreviousRegistryNamespace is where PublishPreviousRelease pushes, beside
// the tree under test's release in c5c3: the charts have the same version
// and the images the same names.
const PreviousRegistryNamespace = "c5c3-previous"

// PublishPreviousRelease releases the commit ref of the repository the
// suite runs in as that commit's own `make release` does, for the node's
// architecture, to the registry's PreviousRegistryNamespace: ref is checked
// out in a git worktree under dir (removed afterwards), and its
// hack/release runs there with its own code, building into dir.
func PublishPreviousRelease(ctx context.Context, reg *controlplane.Registry, ref, dir string) (rel publish.Release, err error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return rel, err
	}
	commit, err := gitOutput(ctx, root, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil {
		return rel, fmt.Errorf("the release the upgrade starts from, commit %s, is not in the history of %s (a shallow clone? CI needs the full history): %w", ref, root, err)
	}
	tree := filepath.Join(dir, "tree")
	if _, err := gitOutput(ctx, root, "worktree", "add", "--detach", tree, commit); err != nil {
		return rel, err
	}
	defer func() {
		// --force: the release's build leaves nothing in the tree, but a
		// worktree must go even after a failed or cut-short one.
		if _, rmErr := gitOutput(context.Background(), root, "worktree", "remove", "--force", tree); rmErr != nil {
			err = errors.Join(err, rmErr)
		}
	}()
	out := filepath.Join(dir, "release")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return rel, err
	}
	registry := reg.Host + "/" + PreviousRegistryNamespace
	// The Makefile's release target of that commit, with the suite's
	// registry and the node's architecture.
	cmd := exec.CommandContext(ctx, "go", "run", "./hack/release",
		"-registry="+registry, "-plain-http=true", "-arch="+runtime.GOARCH,
		"-registry-config="+filepath.Join(dir, "registry-config.json"), "-out="+out)
	cmd.Dir = tree
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return rel, fmt.Errorf("make release of %s: %w\n%s%s", commit, err, stdout.String(), stderr.String())
	}
	if rel, err = parseRelease(stdout.String(), registry); err != nil {
		return rel, fmt.Errorf("make release of %s: %w; it printed:\n%s", commit, err, stdout.String())
	}
	return rel, nil
}

// parseRelease reads what `make release` prints (publish.Release's String)
// to registry: the images by digest, and the chart and its version.
func parseRelease(printed, registry string) (publish.Release, error) {
	var rel publish.Release
	for line := range strings.Lines(printed) {
		f := strings.Fields(line)
		switch {
		case len(f) == 1 && strings.HasPrefix(f[0], registry+"/") && strings.Contains(f[0], "@sha256:"):
			name, _, _ := strings.Cut(strings.TrimPrefix(f[0], registry+"/"), "@")
			rel.Images = append(rel.Images, publish.Image{Name: name, Reference: f[0]})
		case len(f) == 3 && strings.HasPrefix(f[0], "oci://") && f[1] == "--version":
			rel.Chart, rel.ChartVersion = f[0], f[2]
		}
	}
	imgs := ReleaseImages(rel)
	if rel.Chart == "" || imgs.Operator == "" || imgs.Webhook == "" {
		return rel, fmt.Errorf("no chart, glance-operator and glance-webhook image by digest in it")
	}
	return rel, nil
}

func gitOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
