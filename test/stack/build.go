package stack

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/c5c3/glance-operator/test/controlplane"
)

// binaries are the paths of the built glance-operator and glance-webhook.
type binaries struct {
	manager, webhook string
}

// build runs `go build` for both commands into bin/, as `make build` does.
// The Go build cache makes a build of unchanged sources a link at most.
func build(ctx context.Context) (binaries, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return binaries{}, err
	}
	b := binaries{
		manager: filepath.Join(root, "bin", "glance-operator"),
		webhook: filepath.Join(root, "bin", "glance-webhook"),
	}
	for _, target := range []struct{ out, pkg string }{
		{b.manager, "./cmd/manager"},
		{b.webhook, "./cmd/webhook"},
	} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", target.out, target.pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return binaries{}, fmt.Errorf("go build -o %s %s: %w\n%s", target.out, target.pkg, err, strings.TrimSpace(string(out)))
		}
	}
	return b, nil
}
