package conformance

import (
	"embed"
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

// imageFS holds what a Glance image ships beyond Debian's packages: the
// uWSGI entry point and the WSGI shim, at the paths the product renders.
//
//go:embed image
var imageFS embed.FS

// imageOverlay returns the files of image/ by path relative to the image's
// root; each is an executable.
func imageOverlay() (map[string][]byte, error) {
	files := map[string][]byte{}
	err := fs.WalkDir(imageFS, "image", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := imageFS.ReadFile(p)
		if err != nil {
			return err
		}
		files[strings.TrimPrefix(p, "image/")] = data
		return nil
	})
	return files, err
}

// DebianRoot returns the Debian root with Glance that `make
// conformance-root` builds, or an error naming that target.
func DebianRoot() (string, error) { return debianRoot() }

// debianDefaultConfig reports Debian's default glance config files, which
// oslo.config reads whenever they exist: a Glance image runs the rendered
// files alone.
func debianDefaultConfig(rel string) bool {
	dir, name := path.Split(rel)
	return dir == "etc/glance/" && (strings.HasSuffix(name, ".conf") || strings.HasSuffix(name, ".ini"))
}

// WriteGlanceImage writes a Glance image of the Debian root as an OCI
// layout archive at path, named ref: the root without Debian's default
// glance config, the files of image/ over it, running as the glance user
// (uid and gid 42424, which the root was renumbered to). Both launch modes
// run from it: glance-api (eventlet) and uWSGI with the WSGI shim.
func WriteGlanceImage(archive, ref string) (v1.Hash, error) {
	root, err := DebianRoot()
	if err != nil {
		return v1.Hash{}, err
	}
	overlay, err := imageOverlay()
	if err != nil {
		return v1.Hash{}, err
	}
	files := map[string]ociimage.TreeFile{}
	for name, data := range overlay {
		files[name] = ociimage.TreeFile{Data: data, Mode: 0o755}
	}
	id := strconv.FormatInt(render.GlanceUID, 10)
	return ociimage.WriteTreeArchive(archive, ref, runtime.GOARCH, ociimage.TreeImage{
		Trees: []string{root},
		Omit:  debianDefaultConfig,
		Files: files,
		Config: v1.Config{
			User:       id + ":" + id,
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"},
			WorkingDir: "/",
		},
		Comment: "Glance from Debian " + rootSuite + "'s packages (hack/conformance/packages.txt)",
	}, time.Unix(0, 0).UTC())
}
