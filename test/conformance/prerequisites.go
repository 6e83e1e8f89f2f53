//go:build linux

package conformance

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

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
