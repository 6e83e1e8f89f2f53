// Package controlplane starts real Kubernetes control planes on loopback for
// the integration and e2e suites and for `make run`: either an envtest API
// server (etcd + kube-apiserver) or a full local cluster (etcd,
// kube-apiserver with RBAC, kube-controller-manager, kube-scheduler and kwok
// with fake nodes). The binaries are built from the Go module proxy by
// hack/build-control-plane.sh into the artifact cache and linked from
// bin/k8s/<version>/.
package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// KubernetesVersion is the version the binaries are built at; suites assert
// the server reports it.
const KubernetesVersion = "v1.37.2"

// BinDirEnv overrides where the control-plane binaries are looked up.
const BinDirEnv = "GLANCE_CONTROL_PLANE_BIN"

// ArtifactCacheEnv overrides the machine's artifact cache directory.
const ArtifactCacheEnv = "GLANCE_OPERATOR_CACHE"

// ArtifactCache returns the directory where hack/artifact-cache.sh keeps the
// heavy artifacts every clone on the machine shares (control-plane binaries,
// Debian roots), each named by the digest of its inputs:
// $GLANCE_OPERATOR_CACHE, else glance-operator in the user's cache directory.
func ArtifactCache() (string, error) {
	if dir := os.Getenv(ArtifactCacheEnv); dir != "" {
		return dir, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("the artifact cache: %w; set %s", err, ArtifactCacheEnv)
	}
	return filepath.Join(dir, "glance-operator"), nil
}

// OldestKubernetesVersion is the oldest Kubernetes the chart claims
// (Chart.yaml's kubeVersion): the compatibility suite (test/compat) runs its
// kube-apiserver, built by `make control-plane-oldest`, on the etcd of
// KubernetesVersion.
const OldestKubernetesVersion = "v1.31.14"

// OldestBinDirEnv overrides where the oldest kube-apiserver is looked up.
const OldestBinDirEnv = "GLANCE_CONTROL_PLANE_OLDEST_BIN"

// EnvtestBinaries are what an envtest API server needs.
var EnvtestBinaries = []string{"etcd", "kube-apiserver", "kubectl"}

// ClusterBinaries are what a full local cluster needs.
var ClusterBinaries = []string{"etcd", "kube-apiserver", "kubectl", "kube-controller-manager", "kube-scheduler", "kwok"}

// ErrBinariesMissing is returned when the control-plane binaries are absent.
var ErrBinariesMissing = errors.New("control-plane binaries missing")

// RepoRoot returns the directory of the glance-operator go.mod, found by
// walking up from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/c5c3/glance-operator\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the glance-operator repository (no go.mod of module github.com/c5c3/glance-operator above the working directory)")
		}
		dir = parent
	}
}

// BinDir returns the directory holding the control-plane binaries and checks
// that the named ones are there. A missing binary is an error that names the
// make target providing it: suites fail, they never skip.
func BinDir(names ...string) (string, error) {
	return binDir(BinDirEnv, KubernetesVersion, "control-plane", names)
}

// OldestBinDir is BinDir for the kube-apiserver of OldestKubernetesVersion.
func OldestBinDir() (string, error) {
	return binDir(OldestBinDirEnv, OldestKubernetesVersion, "control-plane-oldest", []string{"kube-apiserver"})
}

// binDir returns the directory of the binaries of a Kubernetes version,
// env's value when set, and checks that the named ones are there; a missing
// one is an error naming the make target that builds it.
func binDir(env, version, target string, names []string) (string, error) {
	dir := os.Getenv(env)
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin", "k8s", version)
	}
	var missing []string
	for _, n := range names {
		if st, err := os.Stat(filepath.Join(dir, n)); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%w in %s: %s; run `make %s` to build them", ErrBinariesMissing, dir, strings.Join(missing, ", "), target)
	}
	return dir, nil
}

// moduleDir returns the module cache directory of a Go module at a version,
// downloading it through the module proxy when needed.
func moduleDir(module, version string) (string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", module+"@"+version).Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr != nil && err == nil {
		err = jerr
	}
	switch {
	case info.Error != "":
		return "", fmt.Errorf("go mod download %s@%s: %s", module, version, info.Error)
	case err != nil:
		return "", fmt.Errorf("go mod download %s@%s: %w", module, version, err)
	case info.Dir == "":
		return "", fmt.Errorf("go mod download %s@%s: no module directory reported", module, version)
	}
	return info.Dir, nil
}
