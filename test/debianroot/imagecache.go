package debianroot

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/c5c3/glance-operator/pkg/release"
	"github.com/c5c3/glance-operator/test/controlplane"
)

// imageSources are the directories, relative to the repository, of the code
// and files an image of a root is written from; their non-test files are
// inputs of each cached image.
var imageSources = []string{"test/debianroot", "hack/images/ociimage"}

// unusedImageLife is how long an image of other inputs stays in the cache
// after its last use: hack/artifact-cache.sh's rule for every entry.
const unusedImageLife = 7 * 24 * time.Hour

// GlanceImageArchive returns the OCI layout archive WriteGlanceImage writes
// for root, mode and ref, from the artifact cache: written there once per
// machine and inputs (the root's cache entry, mode, ref, the image code, and
// the Go version, whose gzip the layers' bytes depend on).
func GlanceImageArchive(root Root, mode release.LaunchMode, ref string) (string, v1.Hash, error) {
	return cachedImage(root, root.Name+"-"+string(mode), ref, func(archive string) (v1.Hash, error) {
		return WriteGlanceImage(root, mode, archive, ref)
	})
}

// MariaDBImageArchive is WriteMariaDBImage's archive for ref, from the
// artifact cache as GlanceImageArchive's.
func MariaDBImageArchive(ref string) (string, v1.Hash, error) {
	return cachedImage(MariaDB, "mariadb", ref, func(archive string) (v1.Hash, error) {
		return WriteMariaDBImage(archive, ref)
	})
}

// KeystoneImageArchive is WriteKeystoneImage's archive for ref, from the
// artifact cache as GlanceImageArchive's.
func KeystoneImageArchive(ref string) (string, v1.Hash, error) {
	return cachedImage(Keystone, "keystone", ref, func(archive string) (v1.Hash, error) {
		return WriteKeystoneImage(archive, ref)
	})
}

// cachedImage returns the cached archive of root's image named kind, writing
// it with write when the cache has none of these inputs. The digest is kept
// beside the archive.
func cachedImage(root Root, kind, ref string, write func(archive string) (v1.Hash, error)) (string, v1.Hash, error) {
	// An overridden root is not the one the cache entry names.
	if os.Getenv(root.Env()) != "" || (root.legacyEnv != "" && os.Getenv(root.legacyEnv) != "") {
		return "", v1.Hash{}, fmt.Errorf("the Debian root %s is overridden (%s): its image is not cached; write it with the Write functions", root.Name, root.Env())
	}
	entry, err := root.CacheEntry()
	if err != nil {
		return "", v1.Hash{}, err
	}
	if _, err := root.check(entry); err != nil {
		return "", v1.Hash{}, err
	}
	key, err := imageKey(filepath.Base(entry), kind, ref)
	if err != nil {
		return "", v1.Hash{}, err
	}
	cache, err := controlplane.ArtifactCache()
	if err != nil {
		return "", v1.Hash{}, err
	}
	dir := filepath.Join(cache, "images")
	archive := filepath.Join(dir, kind+"-"+key+".oci.tar")
	if digest, err := readDigest(archive); err == nil {
		now := time.Now()
		_ = os.Chtimes(archive, now, now)
		return archive, digest, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", v1.Hash{}, err
	}
	// Written beside the entry and renamed into it: a suite in another
	// clone never reads half an archive.
	tmp, err := os.MkdirTemp(dir, ".write-")
	if err != nil {
		return "", v1.Hash{}, err
	}
	defer os.RemoveAll(tmp)
	digest, err := write(filepath.Join(tmp, "image.oci.tar"))
	if err != nil {
		return "", v1.Hash{}, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "digest"), []byte(digest.String()), 0o644); err != nil {
		return "", v1.Hash{}, err
	}
	if err := os.Rename(filepath.Join(tmp, "digest"), archive+".digest"); err != nil {
		return "", v1.Hash{}, err
	}
	if err := os.Rename(filepath.Join(tmp, "image.oci.tar"), archive); err != nil {
		return "", v1.Hash{}, err
	}
	trimImages(dir, kind, archive)
	return archive, digest, nil
}

// readDigest returns the digest kept beside a complete cached archive.
func readDigest(archive string) (v1.Hash, error) {
	if _, err := os.Stat(archive); err != nil {
		return v1.Hash{}, err
	}
	data, err := os.ReadFile(archive + ".digest")
	if err != nil {
		return v1.Hash{}, err
	}
	return v1.NewHash(strings.TrimSpace(string(data)))
}

// imageKey digests an image's inputs: the root's cache entry, what image of
// it, its ref, the Go version and architecture, and every non-test file of
// imageSources.
func imageKey(rootEntry, kind, ref string) (string, error) {
	repo, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00", rootEntry, kind, ref, runtime.Version(), runtime.GOARCH)
	var files []string
	for _, src := range imageSources {
		err := filepath.WalkDir(filepath.Join(repo, src), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() && !strings.HasSuffix(path, "_test.go") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	slices.Sort(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(repo, f)
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// trimImages removes the archives of kind from other inputs that no suite
// has used for unusedImageLife.
func trimImages(dir, kind, keep string) {
	old, _ := filepath.Glob(filepath.Join(dir, kind+"-"+strings.Repeat("?", 16)+".oci.tar"))
	for _, archive := range old {
		if archive == keep {
			continue
		}
		if st, err := os.Stat(archive); err == nil && time.Since(st.ModTime()) > unusedImageLife {
			_ = os.Remove(archive + ".digest")
			_ = os.Remove(archive)
		}
	}
}
