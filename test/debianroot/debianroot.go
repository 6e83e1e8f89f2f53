// Package debianroot finds the Debian roots that hack/debianroots/build.sh
// builds, and writes OCI images of them: Glance from Debian's packages for
// the conformance suite and the real node, and the real node's MariaDB and
// Keystone.
//
// A root is defined by hack/debianroots/NAME.packages (a "# suite: SUITE"
// line and the packages to install on a debootstrap minbase) and built into
// the machine's artifact cache as debianroots/NAME-<key>, key being the first
// 12 hex digits of sha256(NAME.packages || build.sh): a change to either means
// a new root.
package debianroot

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/c5c3/glance-operator/test/controlplane"
)

// Root is one root hack/debianroots defines.
type Root struct {
	// Name names the definition hack/debianroots/<Name>.packages and the
	// built root debianroots/<Name>-<key> in the artifact cache.
	Name string
	// Target is the make target that builds the root.
	Target string
	// Files are paths, relative to the root, that a complete root holds.
	Files []string
	// legacyEnv, when set, is an older variable that overrides the root's
	// directory too.
	legacyEnv string
}

// glanceFiles are what both launch modes run from a Glance root.
var glanceFiles = []string{"usr/bin/glance-api", "usr/bin/glance-manage", "usr/bin/glance-cache-pruner", "usr/bin/uwsgi", "usr/lib/uwsgi/plugins/python3_plugin.so"}

var (
	// Glance is Debian trixie's Glance 30.x (2025.1) and uWSGI: the
	// conformance suite's Glance and the real node's Glance image.
	Glance = Root{Name: "glance", Target: "conformance-root", Files: glanceFiles, legacyEnv: "GLANCE_CONFORMANCE_ROOT"}
	// GlanceSid is Debian unstable's Glance 33.x with the same packages: the
	// newer side of the real node's schema-migration upgrade.
	GlanceSid = Root{Name: "glance-sid", Target: "realnode-roots", Files: glanceFiles}
	// MariaDB is Debian trixie's mariadb-server: the real node's database.
	MariaDB = Root{Name: "mariadb", Target: "realnode-roots", Files: []string{"usr/sbin/mariadbd", "usr/bin/mariadb-install-db", "usr/bin/mariadb"}}
	// Keystone is Debian trixie's Keystone 27 (2025.1), uWSGI and PyMySQL:
	// the real node's Keystone.
	Keystone = Root{Name: "keystone", Target: "realnode-roots", Files: []string{
		"usr/bin/keystone-manage", "usr/lib/python3/dist-packages/keystone/wsgi/api.py",
		"usr/bin/uwsgi", "usr/lib/uwsgi/plugins/python3_plugin.so", "usr/lib/python3/dist-packages/pymysql/__init__.py",
	}}
)

// Env is the variable that overrides where the root is looked up:
// DEBIAN_ROOT_ and the name in upper case, "-" as "_"
// (DEBIAN_ROOT_GLANCE_SID).
func (r Root) Env() string {
	return "DEBIAN_ROOT_" + strings.ToUpper(strings.ReplaceAll(r.Name, "-", "_"))
}

// Dir returns the root built for the current definition and script, or the
// directory Env (for Glance, also GLANCE_CONFORMANCE_ROOT) names. A missing
// or incomplete root is an error naming the make target that builds it.
func (r Root) Dir() (string, error) {
	for _, env := range []string{r.Env(), r.legacyEnv} {
		if dir := os.Getenv(env); env != "" && dir != "" {
			return r.check(dir)
		}
	}
	dir, err := r.CacheEntry()
	if err != nil {
		return "", err
	}
	return r.check(dir)
}

// CacheEntry returns where hack/debianroots/build.sh builds the root for the
// current definition and script, built or not.
func (r Root) CacheEntry() (string, error) {
	repo, def, err := r.definition()
	if err != nil {
		return "", err
	}
	script, err := os.ReadFile(filepath.Join(repo, "hack", "debianroots", "build.sh"))
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write(def)
	h.Write(script)
	key := hex.EncodeToString(h.Sum(nil))[:12]
	cache, err := controlplane.ArtifactCache()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "debianroots", r.Name+"-"+key), nil
}

func (r Root) check(dir string) (string, error) {
	for _, f := range r.Files {
		if _, err := os.Lstat(filepath.Join(dir, f)); err != nil {
			return "", fmt.Errorf("the Debian root %s is missing or incomplete (%s not found in %s); run `make %s` to build it", r.Name, f, dir, r.Target)
		}
	}
	return dir, nil
}

var suiteLine = regexp.MustCompile(`^#\s*suite:\s*(\S+)`)

// Suite returns the Debian suite the root's definition names.
func (r Root) Suite() (string, error) {
	_, def, err := r.definition()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(def), "\n") {
		if m := suiteLine.FindStringSubmatch(line); m != nil {
			return m[1], nil
		}
	}
	return "", fmt.Errorf("hack/debianroots/%s.packages has no \"# suite: SUITE\" line", r.Name)
}

// definition returns the repository's directory and the root's definition,
// hack/debianroots/<Name>.packages.
func (r Root) definition() (repo string, def []byte, err error) {
	if repo, err = controlplane.RepoRoot(); err != nil {
		return "", nil, err
	}
	def, err = os.ReadFile(filepath.Join(repo, "hack", "debianroots", r.Name+".packages"))
	if err != nil {
		return "", nil, fmt.Errorf("the Debian root %s: %w", r.Name, err)
	}
	return repo, def, nil
}
