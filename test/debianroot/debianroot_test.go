package debianroot

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/c5c3/glance-operator/pkg/release"
	"github.com/c5c3/glance-operator/test/controlplane"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestGlanceImages: a Glance root gives one image per launch mode, both
// holding glance-api and none of Debian's default /etc/glance config,
// running as 42424 and saying in their history which suite they are from.
// The uWSGI image adds uWSGI and the overlay's entry points over the same
// lowest layer as the eventlet image, which has no uWSGI at all.
func TestGlanceImages(t *testing.T) {
	t.Parallel()
	uwsgiFiles := []string{"usr/bin/uwsgi", "usr/bin/uwsgi-core", "etc/alternatives/uwsgi", "usr/lib/uwsgi/plugins/python3_plugin.so", "usr/local/bin/uwsgi", "var/lib/openstack/bin/glance-wsgi-api"}
	base := map[release.LaunchMode]v1.Hash{}
	for _, mode := range []release.LaunchMode{release.Eventlet, release.UWSGI} {
		cfg, files, layers := writtenImage(t, func(archive string) (v1.Hash, error) {
			return WriteGlanceImage(Glance, mode, archive, "openstack/glance:"+string(mode))
		}, "Glance ("+string(mode)+") from Debian trixie's packages (hack/debianroots/glance.packages)")
		base[mode] = layers[0]
		if cfg.Config.User != "42424:42424" {
			t.Errorf("%s: user %q, want 42424:42424", mode, cfg.Config.User)
		}
		want, unwanted := []string{"usr/bin/glance-api", "usr/bin/glance-manage", "usr/bin/glance-cache-pruner"}, GlanceDefaultConfig
		if mode == release.UWSGI {
			want = append(want, uwsgiFiles...)
		} else {
			unwanted = func(name string) bool { return GlanceDefaultConfig(name) || slices.Contains(uwsgiFiles, name) }
		}
		checkFiles(t, files, want, string(mode)+": Debian's default config or uWSGI's files", unwanted)
		if h := files["etc/glance/"]; h == nil {
			t.Errorf("%s: etc/glance/ missing: only its default config files are left out", mode)
		}
		if h := files["var/lib/glance/"]; h == nil || h.Uid != 42424 || h.Gid != 42424 {
			t.Errorf("%s: var/lib/glance/: %+v, want owned by 42424:42424, the renumbered glance user", mode, h)
		}
	}
	if base[release.Eventlet] != base[release.UWSGI] {
		t.Errorf("the lowest layers differ: eventlet %s, uwsgi %s; want one layer both images share", base[release.Eventlet], base[release.UWSGI])
	}
	// sid has no uwsgi-core: uwsgi itself carries the binary.
	_, files, _ := writtenImage(t, func(archive string) (v1.Hash, error) {
		return WriteGlanceImage(GlanceSid, release.UWSGI, archive, "openstack/glance:2026.2")
	}, "Glance (uwsgi) from Debian sid's packages (hack/debianroots/glance-sid.packages)")
	checkFiles(t, files, append([]string{"usr/bin/glance-api"}, uwsgiFiles...), "Debian's default config", GlanceDefaultConfig)
	if _, err := WriteGlanceImage(Glance, "gunicorn", filepath.Join(t.TempDir(), "image.oci.tar"), "x"); err == nil || !strings.Contains(err.Error(), `"gunicorn"`) {
		t.Errorf("an unknown launch mode: %v, want an error naming it", err)
	}
}

// TestMariaDBImage: the MariaDB image holds the server, the installer and
// the client, runs as root with a PATH, has no data directory content and
// no default command.
func TestMariaDBImage(t *testing.T) {
	t.Parallel()
	cfg, files, _ := writtenImage(t, func(archive string) (v1.Hash, error) {
		return WriteMariaDBImage(archive, "library/mariadb:trixie")
	}, "MariaDB from Debian trixie's packages (hack/debianroots/mariadb.packages)")
	if cfg.Config.User != "0:0" {
		t.Errorf("user %q, want 0:0", cfg.Config.User)
	}
	if !slices.ContainsFunc(cfg.Config.Env, func(e string) bool { return strings.HasPrefix(e, "PATH=") && strings.Contains(e, "/usr/sbin") }) {
		t.Errorf("env %q, want a PATH with /usr/sbin", cfg.Config.Env)
	}
	if len(cfg.Config.Cmd) > 0 || len(cfg.Config.Entrypoint) > 0 {
		t.Errorf("entrypoint %q, cmd %q, want none", cfg.Config.Entrypoint, cfg.Config.Cmd)
	}
	checkFiles(t, files, []string{"usr/sbin/mariadbd", "usr/bin/mariadb-install-db", "usr/bin/mariadb", "etc/mysql/my.cnf", "var/lib/mysql/"},
		"files of the data directory or the documentation", func(name string) bool {
			return strings.HasPrefix(name, "var/lib/mysql/") && name != "var/lib/mysql/" || strings.HasPrefix(name, "usr/share/doc/")
		})
}

// TestKeystoneImage: the Keystone image holds keystone-manage, Keystone's
// WSGI module, uWSGI with its Python plugin and PyMySQL, none of Debian's
// default keystone config, and runs as the keystone user of the root, by
// number and not root, with no default command.
func TestKeystoneImage(t *testing.T) {
	t.Parallel()
	dir, err := Keystone.Dir()
	if err != nil {
		t.Fatal(err)
	}
	cfg, files, _ := writtenImage(t, func(archive string) (v1.Hash, error) {
		return WriteKeystoneImage(archive, "test/keystone:trixie")
	}, "Keystone from Debian trixie's packages (hack/debianroots/keystone.packages)")
	passwd, err := os.ReadFile(filepath.Join(dir, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for _, line := range strings.Split(string(passwd), "\n") {
		if f := strings.Split(line, ":"); f[0] == "keystone" {
			want = f[2] + ":" + f[3]
		}
	}
	if cfg.Config.User != want || strings.HasPrefix(want, "0:") || want == "" {
		t.Errorf("user %q, want the root's keystone user %q, by number and not root", cfg.Config.User, want)
	}
	if len(cfg.Config.Cmd) > 0 || len(cfg.Config.Entrypoint) > 0 {
		t.Errorf("entrypoint %q, cmd %q, want none", cfg.Config.Entrypoint, cfg.Config.Cmd)
	}
	checkFiles(t, files, append([]string{"etc/keystone/", "etc/keystone/policy.d/"}, Keystone.Files...),
		"of Debian's default keystone config or documentation", func(name string) bool {
			return name == "etc/keystone/keystone.conf" || name == "etc/keystone/keystone-uwsgi.ini" || strings.HasPrefix(name, "usr/share/doc/")
		})
}

// TestDir: a root missing from the directory an override names is an error
// naming the make target that builds it; GLANCE_CONFORMANCE_ROOT still
// overrides the Glance root; each definition names its suite.
func TestDir(t *testing.T) {
	empty := t.TempDir()
	t.Setenv(MariaDB.Env(), empty)
	if _, err := MariaDB.Dir(); err == nil || !strings.Contains(err.Error(), "make realnode-roots") || !strings.Contains(err.Error(), "usr/sbin/mariadbd") {
		t.Errorf("MariaDB.Dir() in an empty directory: %v, want an error naming usr/sbin/mariadbd and make realnode-roots", err)
	}
	if MariaDB.Env() != "DEBIAN_ROOT_MARIADB" || GlanceSid.Env() != "DEBIAN_ROOT_GLANCE_SID" {
		t.Errorf("variables %s, %s", MariaDB.Env(), GlanceSid.Env())
	}

	fake := t.TempDir()
	for _, f := range Glance.Files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(fake, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(fake, f), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(Glance.Env(), "")
	t.Setenv("GLANCE_CONFORMANCE_ROOT", fake)
	if dir, err := Glance.Dir(); err != nil || dir != fake {
		t.Errorf("Glance.Dir() with GLANCE_CONFORMANCE_ROOT=%s: %q, %v", fake, dir, err)
	}
	t.Setenv("GLANCE_CONFORMANCE_ROOT", empty)
	if _, err := Glance.Dir(); err == nil || !strings.Contains(err.Error(), "make conformance-root") {
		t.Errorf("Glance.Dir() in an empty directory: %v, want an error naming make conformance-root", err)
	}

	for r, want := range map[*Root]string{&Glance: "trixie", &GlanceSid: "sid", &MariaDB: "trixie", &Keystone: "trixie"} {
		if got, err := r.Suite(); err != nil || got != want {
			t.Errorf("%s: suite %q, %v, want %q", r.Name, got, err, want)
		}
	}
}

// writtenImage writes an image with write, opens it, checks its history holds
// comment, and returns its config, its layers' entries and its layers'
// digests, lowest first.
func writtenImage(t *testing.T, write func(archive string) (v1.Hash, error), comment string) (*v1.ConfigFile, map[string]*tar.Header, []v1.Hash) {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "image.oci.tar")
	digest, err := write(archive)
	if err != nil {
		t.Fatal(err)
	}
	img := layoutImage(t, archive, digest)
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var layers []v1.Hash
	for _, l := range m.Layers {
		layers = append(layers, l.Digest)
	}
	return configOf(t, img, comment), layerFiles(t, img), layers
}

// layoutImage extracts an OCI layout archive and opens its image digest
// with go-containerregistry's layout package.
func layoutImage(t *testing.T, archive string, digest v1.Hash) v1.Image {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = eachEntry(f, func(h *tar.Header, r io.Reader) error {
		if !filepath.IsLocal(h.Name) {
			return fmt.Errorf("entry %q leaves the layout", h.Name)
		}
		path := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			return os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			return writeFile(path, r)
		}
		return fmt.Errorf("entry %q has type %q, want files and directories", h.Name, h.Typeflag)
	})
	if err != nil {
		t.Fatalf("extracting %s: %v", archive, err)
	}
	index, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("opening %s as an OCI layout: %v", archive, err)
	}
	img, err := index.Image(digest)
	if err != nil {
		t.Fatalf("%s has no image %s: %v", archive, digest, err)
	}
	return img
}

func writeFile(path string, r io.Reader) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// checkFiles reports each name of want that files lacks, and the names in
// files that unwanted, described by what, reports.
func checkFiles(t *testing.T, files map[string]*tar.Header, want []string, what string, unwanted func(string) bool) {
	t.Helper()
	for _, name := range want {
		if _, ok := files[name]; !ok {
			t.Errorf("%s missing", name)
		}
	}
	var extra []string
	for name := range files {
		if unwanted(name) {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		t.Errorf("%d %s in the image: %q...", len(extra), what, extra[:min(len(extra), 3)])
	}
}

// configOf returns img's config, checking its history holds comment.
func configOf(t *testing.T, img v1.Image, comment string) *v1.ConfigFile {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(cfg.History, func(h v1.History) bool { return h.Comment == comment }) {
		t.Errorf("history %+v, want the comment %q", cfg.History, comment)
	}
	return cfg
}

// layerFiles returns the headers of every layer's entries by name, a
// directory's with its trailing slash; an upper layer's entry replaces a
// lower one's.
func layerFiles(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*tar.Header{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		err = eachEntry(rc, func(h *tar.Header, _ io.Reader) error {
			files[h.Name] = h
			return nil
		})
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// eachEntry calls fn with each entry of the tar stream r, up to the first
// error.
func eachEntry(r io.Reader, fn func(h *tar.Header, r io.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(h, tr); err != nil {
			return err
		}
	}
}

// TestCacheEntryAgreesWithTheBuildScript: the suites look each root up in
// the cache entry hack/debianroots/build.sh builds it into.
func TestCacheEntryAgreesWithTheBuildScript(t *testing.T) {
	t.Setenv(controlplane.ArtifactCacheEnv, t.TempDir())
	repo, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(repo, "hack", "debianroots", "build.sh"), "keys", Glance.Name, GlanceSid.Name, MariaDB.Name, Keystone.Name).CombinedOutput()
	if err != nil {
		t.Fatalf("build.sh keys: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	cache, _ := controlplane.ArtifactCache()
	for i, r := range []Root{Glance, GlanceSid, MariaDB, Keystone} {
		entry, err := r.CacheEntry()
		if err != nil {
			t.Fatal(err)
		}
		if i >= len(lines) {
			t.Fatalf("build.sh keys printed %q, no line for %s", out, r.Name)
		}
		if want := r.Name + " " + strings.TrimPrefix(entry, cache+"/"); lines[i] != want {
			t.Errorf("build.sh keys says %q, the suites look in %q", lines[i], want)
		}
	}
}

// TestImagesAreCachedByTheirInputs: an image of a root is written once per
// inputs; the same inputs give the same archive and digest without writing
// again, another ref another entry, and the recorded digest is the one the
// writer returned.
func TestImagesAreCachedByTheirInputs(t *testing.T) {
	t.Setenv(controlplane.ArtifactCacheEnv, t.TempDir())
	t.Setenv(MariaDB.Env(), "")
	// A small stand-in for the MariaDB root where the cache keeps it.
	entry, err := MariaDB.CacheEntry()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{"var/lib/mysql/ibdata1", "etc/mysql/my.cnf"}, MariaDB.Files...) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(entry, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(entry, f), []byte(f), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	archive, digest, err := MariaDBImageArchive("test/mariadb:one")
	if err != nil {
		t.Fatal(err)
	}
	want, err := WriteMariaDBImage(filepath.Join(t.TempDir(), "direct.oci.tar"), "test/mariadb:one")
	if err != nil {
		t.Fatal(err)
	}
	if digest != want {
		t.Errorf("cached image's digest %s, the writer's %s", digest, want)
	}
	layoutImage(t, archive, digest)

	writes := 0
	count := func(archive string) (v1.Hash, error) {
		writes++
		return WriteMariaDBImage(archive, "test/mariadb:one")
	}
	again, againDigest, err := cachedImage(MariaDB, "mariadb", "test/mariadb:one", count)
	if err != nil {
		t.Fatal(err)
	}
	if again != archive || againDigest != digest || writes != 0 {
		t.Errorf("the same inputs again: %s %s after %d writes, want %s %s after none", again, againDigest, writes, archive, digest)
	}
	other, _, err := cachedImage(MariaDB, "mariadb", "test/mariadb:two", count)
	if err != nil {
		t.Fatal(err)
	}
	if other == archive || writes != 1 {
		t.Errorf("another ref: %s after %d writes, want a new entry written once", other, writes)
	}

	t.Setenv(MariaDB.Env(), entry)
	if _, _, err := MariaDBImageArchive("test/mariadb:one"); err == nil || !strings.Contains(err.Error(), MariaDB.Env()) {
		t.Errorf("an overridden root: %v, want an error naming %s", err, MariaDB.Env())
	}
}
