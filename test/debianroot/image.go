package debianroot

import (
	"embed"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/c5c3/glance-operator/hack/images/ociimage"
	"github.com/c5c3/glance-operator/pkg/release"
	"github.com/c5c3/glance-operator/pkg/render"
)

// glanceImageFS holds what a Glance image ships beyond Debian's packages:
// the uWSGI entry point and the WSGI shim, at the paths the product renders.
//
//go:embed glanceimage
var glanceImageFS embed.FS

// GlanceOverlay returns the files a Glance image adds to its root, by path
// relative to the image's root; each is an executable.
func GlanceOverlay() (map[string][]byte, error) {
	files := map[string][]byte{}
	err := fs.WalkDir(glanceImageFS, "glanceimage", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := glanceImageFS.ReadFile(p)
		if err != nil {
			return err
		}
		files[strings.TrimPrefix(p, "glanceimage/")] = data
		return nil
	})
	return files, err
}

// GlanceDefaultConfig reports Debian's default glance config files (rel is
// relative to the root, slash separated), which oslo.config reads whenever
// they exist: a Glance image runs the rendered files alone.
func GlanceDefaultConfig(rel string) bool {
	dir, name := path.Split(rel)
	return dir == "etc/glance/" && (strings.HasSuffix(name, ".conf") || strings.HasSuffix(name, ".ini"))
}

// imageEnv is the environment of the images' processes.
var imageEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}

// uwsgiPackage reports the Debian packages of uWSGI in a Glance root, which
// only a uWSGI image ships: uwsgi and the uwsgi-* packages (trixie splits
// out uwsgi-core, sid does not; both have uwsgi-plugin-python3).
func uwsgiPackage(name string) bool { return name == "uwsgi" || strings.HasPrefix(name, "uwsgi-") }

// WriteGlanceImage writes the Glance image of a Glance root (Glance or
// GlanceSid) for a launch mode as an OCI layout archive at path, named ref.
// Its lowest layer is the root without Debian's default glance config and
// without uWSGI, the same for both modes, so a node that runs one pulls
// only the other's upper layers. A uWSGI image adds uWSGI's files and
// GlanceOverlay's entry points; an eventlet image runs glance-api and has
// no uWSGI at all (dpkg's database still lists its packages). Both run as
// the glance user (uid and gid 42424, which the root was renumbered to).
func WriteGlanceImage(root Root, mode release.LaunchMode, archive, ref string) (v1.Hash, error) {
	dir, err := root.Dir()
	if err != nil {
		return v1.Hash{}, err
	}
	uwsgi, err := packageFiles(dir, "uwsgi", uwsgiPackage)
	if err != nil {
		return v1.Hash{}, err
	}
	id := strconv.FormatInt(render.GlanceUID, 10)
	img := ociimage.TreeImage{
		Trees:  []ociimage.Tree{{Dir: dir, Omit: func(rel string) bool { return GlanceDefaultConfig(rel) || uwsgi.owns(rel) }}},
		Config: v1.Config{User: id + ":" + id, Env: imageEnv, WorkingDir: "/"},
	}
	switch mode {
	case release.Eventlet:
	case release.UWSGI:
		overlay, err := GlanceOverlay()
		if err != nil {
			return v1.Hash{}, err
		}
		img.Files = map[string]ociimage.TreeFile{}
		for name, data := range overlay {
			img.Files[name] = ociimage.TreeFile{Data: data, Mode: 0o755}
		}
		img.Trees = append(img.Trees, ociimage.Tree{Dir: dir, Omit: func(rel string) bool { return !uwsgi.owns(rel) && !uwsgi.parents[rel] }})
	default:
		return v1.Hash{}, fmt.Errorf("a Glance image for launch mode %q: want %q or %q", mode, release.Eventlet, release.UWSGI)
	}
	return writeImage(root, "Glance ("+string(mode)+")", archive, ref, img)
}

// ownedFiles are the files of some Debian packages in a root, by path
// relative to the root: what their dpkg lists name, and the symbolic links
// beside those files or in /etc/alternatives that lead to one of them (the
// links update-alternatives made). parents are their directories.
type ownedFiles struct {
	files, parents map[string]bool
}

func (o ownedFiles) owns(rel string) bool { return o.files[rel] }

// packageFiles reads the files of the packages of the root at dir that
// match from its dpkg database; required must be one of them.
func packageFiles(dir, required string, match func(pkg string) bool) (ownedFiles, error) {
	o := ownedFiles{files: map[string]bool{}, parents: map[string]bool{}}
	lists, err := filepath.Glob(filepath.Join(dir, "var/lib/dpkg/info", "*.list"))
	if err != nil {
		return o, err
	}
	found := false
	for _, list := range lists {
		pkg, _, _ := strings.Cut(strings.TrimSuffix(filepath.Base(list), ".list"), ":")
		if !match(pkg) {
			continue
		}
		found = found || pkg == required
		b, err := os.ReadFile(list)
		if err != nil {
			return o, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			rel := strings.TrimPrefix(line, "/")
			if fi, err := os.Lstat(filepath.Join(dir, rel)); rel != "" && err == nil && !fi.IsDir() {
				o.files[rel] = true
			}
		}
	}
	if !found {
		return o, fmt.Errorf("package %s is not installed in %s: rebuild the root with its make target", required, dir)
	}
	// Links to the packages' files: in the directories of those files, and
	// the alternatives' links.
	dirs := map[string]bool{"etc/alternatives": true}
	for rel := range o.files {
		dirs[path.Dir(rel)] = true
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		entries, err := os.ReadDir(filepath.Join(dir, d))
		if err != nil {
			return o, err
		}
		for _, e := range entries {
			if rel := path.Join(d, e.Name()); e.Type()&fs.ModeSymlink != 0 && leadsTo(dir, rel, o.files) {
				o.files[rel] = true
			}
		}
	}
	for rel := range o.files {
		for p := path.Dir(rel); p != "."; p = path.Dir(p) {
			o.parents[p] = true
		}
	}
	return o, nil
}

// leadsTo reports whether the symbolic link rel in the root at dir leads,
// in a few links, to one of files.
func leadsTo(dir, rel string, files map[string]bool) bool {
	for range 4 {
		target, err := os.Readlink(filepath.Join(dir, rel))
		if err != nil {
			return false
		}
		if path.IsAbs(target) {
			rel = strings.TrimPrefix(path.Clean(target), "/")
		} else {
			rel = path.Join(path.Dir(rel), target)
		}
		if files[rel] {
			return true
		}
	}
	return false
}

// WriteMariaDBImage writes an image of the MariaDB root as an OCI layout
// archive at path, named ref, running as root (mariadbd --user=root): no
// default command, a pod gives it. The data directory the package's
// installation initialised (/var/lib/mysql) is left empty, and Debian's
// documentation out.
func WriteMariaDBImage(archive, ref string) (v1.Hash, error) {
	dir, err := MariaDB.Dir()
	if err != nil {
		return v1.Hash{}, err
	}
	return writeImage(MariaDB, "MariaDB", archive, ref, ociimage.TreeImage{
		Trees: []ociimage.Tree{{Dir: dir, Omit: func(rel string) bool {
			return strings.HasPrefix(rel, "var/lib/mysql/") || rel == "usr/share/doc" || rel == "usr/share/man"
		}}},
		Config: v1.Config{User: "0:0", Env: imageEnv, WorkingDir: "/"},
	})
}

// KeystoneDefaultConfig reports Debian's default keystone config files (rel
// is relative to the root, slash separated): keystone.conf, which
// oslo.config reads whenever it exists, and the uWSGI configuration of
// Debian's init script. A Keystone image runs the configuration its pod
// gives.
func KeystoneDefaultConfig(rel string) bool {
	return rel == "etc/keystone/keystone.conf" || rel == "etc/keystone/keystone-uwsgi.ini"
}

// WriteKeystoneImage writes an image of the Keystone root as an OCI layout
// archive at path, named ref: Keystone's programs and uWSGI, without
// Debian's default keystone config and documentation, running as the
// keystone user the package made (by number, so that a pod can be held to
// a non-root user). No default command: a pod gives it.
func WriteKeystoneImage(archive, ref string) (v1.Hash, error) {
	dir, err := Keystone.Dir()
	if err != nil {
		return v1.Hash{}, err
	}
	user, err := systemUser(dir, "keystone")
	if err != nil {
		return v1.Hash{}, err
	}
	return writeImage(Keystone, "Keystone", archive, ref, ociimage.TreeImage{
		Trees: []ociimage.Tree{{Dir: dir, Omit: func(rel string) bool {
			return KeystoneDefaultConfig(rel) || rel == "usr/share/doc" || rel == "usr/share/man"
		}}},
		Config: v1.Config{User: user, Env: imageEnv, WorkingDir: "/"},
	})
}

// systemUser returns "UID:GID" of the user name in the root at dir, from its
// /etc/passwd.
func systemUser(dir, name string) (string, error) {
	passwd, err := os.ReadFile(filepath.Join(dir, "etc", "passwd"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(passwd), "\n") {
		// name:password:UID:GID:...
		if f := strings.Split(line, ":"); len(f) >= 4 && f[0] == name {
			return f[2] + ":" + f[3], nil
		}
	}
	return "", fmt.Errorf("the root %s has no user %s: rebuild it with its make target", dir, name)
}

// writeImage writes img of root r, its history naming what and the root's
// suite, with every timestamp at the epoch: the same root gives the same
// digest.
func writeImage(r Root, what, archive, ref string, img ociimage.TreeImage) (v1.Hash, error) {
	suite, err := r.Suite()
	if err != nil {
		return v1.Hash{}, err
	}
	img.Comment = fmt.Sprintf("%s from Debian %s's packages (hack/debianroots/%s.packages)", what, suite, r.Name)
	return ociimage.WriteTreeArchive(archive, ref, runtime.GOARCH, img, time.Unix(0, 0).UTC())
}
