package debianroot

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/c5c3/glance-operator/hack/images/ociimage"
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

// WriteGlanceImage writes a Glance image of a Glance root (Glance or
// GlanceSid) as an OCI layout archive at path, named ref: the root without
// Debian's default glance config, GlanceOverlay's files over it, running as
// the glance user (uid and gid 42424, which the root was renumbered to).
// Both launch modes run from it: glance-api (eventlet) and uWSGI with the
// WSGI shim.
func WriteGlanceImage(root Root, archive, ref string) (v1.Hash, error) {
	overlay, err := GlanceOverlay()
	if err != nil {
		return v1.Hash{}, err
	}
	files := map[string]ociimage.TreeFile{}
	for name, data := range overlay {
		files[name] = ociimage.TreeFile{Data: data, Mode: 0o755}
	}
	id := strconv.FormatInt(render.GlanceUID, 10)
	return writeImage(root, "Glance", archive, ref, ociimage.TreeImage{
		Omit:   GlanceDefaultConfig,
		Files:  files,
		Config: v1.Config{User: id + ":" + id, Env: imageEnv, WorkingDir: "/"},
	})
}

// WriteMariaDBImage writes an image of the MariaDB root as an OCI layout
// archive at path, named ref, running as root (mariadbd --user=root): no
// default command, a pod gives it. The data directory the package's
// installation initialised (/var/lib/mysql) is left empty, and Debian's
// documentation out.
func WriteMariaDBImage(archive, ref string) (v1.Hash, error) {
	return writeImage(MariaDB, "MariaDB", archive, ref, ociimage.TreeImage{
		Omit: func(rel string) bool {
			return strings.HasPrefix(rel, "var/lib/mysql/") || rel == "usr/share/doc" || rel == "usr/share/man"
		},
		Config: v1.Config{User: "0:0", Env: imageEnv, WorkingDir: "/"},
	})
}

// writeImage writes img of root r, its history naming what and the root's
// suite, with every timestamp at the epoch: the same root gives the same
// digest.
func writeImage(r Root, what, archive, ref string, img ociimage.TreeImage) (v1.Hash, error) {
	dir, err := r.Dir()
	if err != nil {
		return v1.Hash{}, err
	}
	suite, err := r.Suite()
	if err != nil {
		return v1.Hash{}, err
	}
	img.Trees = []string{dir}
	img.Comment = fmt.Sprintf("%s from Debian %s's packages (hack/debianroots/%s.packages)", what, suite, r.Name)
	return ociimage.WriteTreeArchive(archive, ref, runtime.GOARCH, img, time.Unix(0, 0).UTC())
}
