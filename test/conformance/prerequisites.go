//go:build linux

package conformance

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/c5c3/glance-operator/test/controlplane"
)

// RootEnv overrides where the Debian root is looked up.
const RootEnv = "GLANCE_CONFORMANCE_ROOT"

// rootSuite is the Debian release the root is built from: trixie has Glance
// 30.x (2025.1); bookworm's Zed predates the paste layout the renderer
// writes.
const rootSuite = "trixie"

// debianRoot returns the root built by hack/conformance/build-root.sh for the
// current package list and script: bin/conformance/trixie-<key>, key being
// the first 12 hex digits of sha256(packages.txt || build-root.sh), exactly
// as the script computes it. A missing root is an error naming the make
// target that builds it.
func debianRoot() (string, error) {
	if dir := os.Getenv(RootEnv); dir != "" {
		return checkRoot(dir)
	}
	repo, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range []string{"packages.txt", "build-root.sh"} {
		data, err := os.ReadFile(filepath.Join(repo, "hack", "conformance", f))
		if err != nil {
			return "", err
		}
		h.Write(data)
	}
	key := hex.EncodeToString(h.Sum(nil))[:12]
	return checkRoot(filepath.Join(repo, "bin", "conformance", rootSuite+"-"+key))
}

func checkRoot(dir string) (string, error) {
	for _, f := range []string{"usr/bin/glance-api", "usr/bin/glance-manage", "usr/bin/glance-cache-pruner", "usr/bin/uwsgi", "usr/lib/uwsgi/plugins/python3_plugin.so"} {
		if _, err := os.Lstat(filepath.Join(dir, f)); err != nil {
			return "", fmt.Errorf("the Debian %s root with Glance is missing or incomplete (%s not found in %s); run `make conformance-root` to build it", rootSuite, f, dir)
		}
	}
	return dir, nil
}

// hostPrerequisites checks what the suite needs from the host beyond the
// root: root privileges (namespaces, mounts, chroot) and MariaDB.
func hostPrerequisites() error {
	if os.Geteuid() != 0 {
		return errors.New("the conformance suite must run as root: it uses mount, PID and network namespaces, overlay and bind mounts, and chroot")
	}
	var missing []string
	for _, b := range []string{"mariadbd", "mariadb-install-db", "mariadb"} {
		if _, err := exec.LookPath(b); err != nil {
			if _, err := os.Stat(filepath.Join("/usr/sbin", b)); err != nil {
				missing = append(missing, b)
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("MariaDB is missing (%s not found); install the Debian package: apt-get install mariadb-server", strings.Join(missing, ", "))
	}
	return nil
}

func lookSbin(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return filepath.Join("/usr/sbin", name)
}
