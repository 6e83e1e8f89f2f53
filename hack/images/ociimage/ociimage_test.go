package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"sigs.k8s.io/yaml"
)

// shared is one build of the images that the content and registry tests
// read; the reproducibility test builds a second one to compare.
var shared struct {
	once    sync.Once
	dir     string
	results []Result
	err     error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func builtImages(t *testing.T) []Result {
	t.Helper()
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "ociimage-test-")
		if shared.err == nil {
			shared.results, shared.err = Build(context.Background(), Options{OutDir: shared.dir})
		}
	})
	if shared.err != nil {
		t.Fatalf("building the images: %v", shared.err)
	}
	if len(shared.results) != len(Images) {
		t.Fatalf("Build returned %d results, want %d", len(shared.results), len(Images))
	}
	return shared.results
}

func TestReproducible(t *testing.T) {
	first := builtImages(t)
	second, err := Build(context.Background(), Options{OutDir: t.TempDir()})
	if err != nil {
		t.Fatalf("second build: %v", err)
	}
	if len(second) != len(first) {
		t.Fatalf("second build returned %d results, want %d", len(second), len(first))
	}
	for i := range first {
		a, b := first[i], second[i]
		if a.Reference != b.Reference || a.Digest != b.Digest {
			t.Errorf("builds differ: %s %s, then %s %s", a.Reference, a.Digest, b.Reference, b.Digest)
		}
		ab, err := os.ReadFile(a.Path)
		if err != nil {
			t.Fatal(err)
		}
		bb, err := os.ReadFile(b.Path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ab, bb) {
			t.Errorf("%s and %s differ", a.Path, b.Path)
		}
	}
}

func TestImageContent(t *testing.T) {
	results := builtImages(t)
	tag := expectedTag(t)
	revision := gitOutput(t, "rev-parse", "HEAD")
	created := commitTime(t)
	hostCA, err := os.ReadFile(CABundle)
	if err != nil {
		t.Fatal(err)
	}

	for i, img := range Images {
		t.Run(img.Name, func(t *testing.T) {
			r := results[i]
			if want := img.Repository + ":" + tag; r.Reference != want {
				t.Errorf("reference %q, want %q", r.Reference, want)
			}
			if want := fmt.Sprintf("%s %s  %s", r.Reference, r.Digest, r.Path); r.String() != want {
				t.Errorf("printed line %q, want %q", r.String(), want)
			}
			if filepath.Base(r.Path) != img.Name+".oci.tar" {
				t.Errorf("archive %s, want %s.oci.tar", r.Path, img.Name)
			}

			archive := readArchive(t, r.Path, created)
			if got := string(archive.files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
				t.Errorf("oci-layout %q", got)
			}
			for name, b := range archive.files {
				if hex, ok := strings.CutPrefix(name, "blobs/sha256/"); ok && hex != "" && sha256Hash(b).Hex != hex {
					t.Errorf("blob %s holds content of digest %s", name, sha256Hash(b))
				}
			}

			index, err := v1.ParseIndexManifest(bytes.NewReader(archive.files["index.json"]))
			if err != nil {
				t.Fatalf("index.json: %v", err)
			}
			if len(index.Manifests) != 1 {
				t.Fatalf("index.json lists %d manifests, want 1", len(index.Manifests))
			}
			desc := index.Manifests[0]
			if desc.Digest != r.Digest || desc.MediaType != types.OCIManifestSchema1 {
				t.Errorf("index.json points at %s %s, want %s %s", desc.MediaType, desc.Digest, types.OCIManifestSchema1, r.Digest)
			}
			if got := desc.Annotations[AnnotationRefName]; got != r.Reference {
				t.Errorf("%s = %q, want %q", AnnotationRefName, got, r.Reference)
			}

			// Read the layout as `crane push DIR` does, after the README's tar -xf.
			image, err := layoutImage(t, r)
			if err != nil {
				t.Fatal(err)
			}
			if err := validate.Image(image); err != nil {
				t.Errorf("go-containerregistry finds the image invalid: %v", err)
			}

			manifestBlob := archive.blob(t, desc)
			manifest, err := v1.ParseManifest(bytes.NewReader(manifestBlob))
			if err != nil {
				t.Fatalf("manifest: %v", err)
			}
			wantLabels := map[string]string{
				"org.opencontainers.image.source":   "https://github.com/c5c3/glance-operator",
				"org.opencontainers.image.version":  tag,
				"org.opencontainers.image.revision": revision,
			}
			if !reflect.DeepEqual(manifest.Annotations, wantLabels) {
				t.Errorf("manifest annotations %v, want %v", manifest.Annotations, wantLabels)
			}
			if len(manifest.Layers) != 1 || manifest.Layers[0].MediaType != types.OCILayer {
				t.Fatalf("manifest layers %+v, want one %s", manifest.Layers, types.OCILayer)
			}

			config, err := v1.ParseConfigFile(bytes.NewReader(archive.blob(t, manifest.Config)))
			if err != nil {
				t.Fatalf("config: %v", err)
			}
			c := config.Config
			if c.User != "65532:65532" {
				t.Errorf("User %q, want 65532:65532", c.User)
			}
			if want := []string{"/" + img.Name}; !slices.Equal(c.Entrypoint, want) || len(c.Cmd) != 0 {
				t.Errorf("Entrypoint %q Cmd %q, want %q and no Cmd", c.Entrypoint, c.Cmd, want)
			}
			if c.WorkingDir != "/" {
				t.Errorf("WorkingDir %q, want /", c.WorkingDir)
			}
			if !reflect.DeepEqual(c.Labels, wantLabels) {
				t.Errorf("labels %v, want %v", c.Labels, wantLabels)
			}
			if !config.Created.Equal(created) || config.OS != "linux" {
				t.Errorf("created %v os %q, want %v linux", config.Created.Time, config.OS, created)
			}

			layerBlob := archive.blob(t, manifest.Layers[0])
			zr, err := gzip.NewReader(bytes.NewReader(layerBlob))
			if err != nil {
				t.Fatalf("layer: %v", err)
			}
			layerTar, err := io.ReadAll(zr)
			if err != nil {
				t.Fatalf("layer: %v", err)
			}
			if want := []v1.Hash{sha256Hash(layerTar)}; !slices.Equal(config.RootFS.DiffIDs, want) {
				t.Errorf("diff_ids %v, want %v", config.RootFS.DiffIDs, want)
			}

			rootfs := readTar(t, bytes.NewReader(layerTar), created)
			wantNames := []string{"etc/", "etc/group", "etc/passwd", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca-certificates.crt", img.Name}
			if !slices.Equal(rootfs.names, wantNames) {
				t.Errorf("layer holds %q, want %q (and no shell)", rootfs.names, wantNames)
			}
			if !bytes.Equal(rootfs.files["etc/ssl/certs/ca-certificates.crt"], hostCA) {
				t.Errorf("the layer's CA bundle differs from %s", CABundle)
			}
			if !hasLine(rootfs.files["etc/passwd"], "nonroot:x:65532:65532:") {
				t.Errorf("etc/passwd has no nonroot 65532:65532:\n%s", rootfs.files["etc/passwd"])
			}
			if !hasLine(rootfs.files["etc/group"], "nonroot:x:65532:") {
				t.Errorf("etc/group has no nonroot 65532:\n%s", rootfs.files["etc/group"])
			}
			if mode := rootfs.modes[img.Name]; mode != 0o755 {
				t.Errorf("/%s mode %o, want 755", img.Name, mode)
			}

			bin, err := elf.NewFile(bytes.NewReader(rootfs.files[img.Name]))
			if err != nil {
				t.Fatalf("/%s is not an ELF binary: %v", img.Name, err)
			}
			for _, p := range bin.Progs {
				if p.Type == elf.PT_INTERP {
					t.Errorf("/%s has a PT_INTERP header: dynamically linked", img.Name)
				}
			}
			if libs, err := bin.ImportedLibraries(); err != nil || len(libs) > 0 {
				t.Errorf("/%s imports libraries %q (%v)", img.Name, libs, err)
			}
		})
	}
}

func TestMissingCABundle(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "ca-certificates.crt")
	_, err := Build(context.Background(), Options{OutDir: t.TempDir(), CABundle: missing})
	if err == nil || !strings.Contains(err.Error(), "Debian package ca-certificates") || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Build without a CA bundle: %v, want an error naming %s and the package ca-certificates", err, missing)
	}
}

func TestSourceDateEpoch(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	s, err := readSource(context.Background(), root, "1700000000")
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Unix(1700000000, 0).UTC(); !s.Created.Equal(want) {
		t.Errorf("created %v, want %v from SOURCE_DATE_EPOCH", s.Created, want)
	}
	for _, bad := range []string{"yesterday", "-1", "1.5"} {
		if _, err := readSource(context.Background(), root, bad); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
			t.Errorf("SOURCE_DATE_EPOCH=%q: %v, want an error naming SOURCE_DATE_EPOCH", bad, err)
		}
	}
}

// tarContent is a tar stream read into memory.
type tarContent struct {
	names []string
	files map[string][]byte
	modes map[string]int64
}

func readArchive(t *testing.T, path string, mtime time.Time) layoutArchive {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return layoutArchive{readTar(t, f, mtime)}
}

// readTar reads a tar stream and checks the metadata the build fixes.
func readTar(t *testing.T, r io.Reader, mtime time.Time) tarContent {
	t.Helper()
	c := tarContent{files: map[string][]byte{}, modes: map[string]int64{}}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading tar: %v", err)
		}
		if !h.ModTime.Equal(mtime) || h.Uid != 0 || h.Gid != 0 || h.Uname != "root" || h.Gname != "root" {
			t.Errorf("tar entry %s: mtime %v owner %d:%d (%s:%s), want %v 0:0 (root:root)", h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname, mtime)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("reading tar entry %s: %v", h.Name, err)
		}
		c.names = append(c.names, h.Name)
		c.files[h.Name] = b
		c.modes[h.Name] = h.Mode
	}
	if !slices.IsSorted(c.names) {
		t.Errorf("tar entries not sorted: %q", c.names)
	}
	return c
}

// layoutArchive is an OCI image layout archive read into memory.
type layoutArchive struct{ tarContent }

// blob returns the blob desc points at, checking its size.
func (a layoutArchive) blob(t *testing.T, desc v1.Descriptor) []byte {
	t.Helper()
	b, ok := a.files["blobs/"+desc.Digest.Algorithm+"/"+desc.Digest.Hex]
	if !ok {
		t.Fatalf("the archive has no blob %s", desc.Digest)
	}
	if int64(len(b)) != desc.Size {
		t.Fatalf("blob %s has %d bytes, its descriptor says %d", desc.Digest, len(b), desc.Size)
	}
	return b
}

func hasLine(b []byte, prefix string) bool {
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

func expectedTag(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", ChartFile))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil || chart.AppVersion == "" {
		t.Fatalf("reading appVersion from %s: %v", ChartFile, err)
	}
	return chart.AppVersion
}

func gitOutput(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// commitTime is the created time of an image built without SOURCE_DATE_EPOCH.
func commitTime(t *testing.T) time.Time {
	t.Helper()
	sec, err := strconv.ParseInt(gitOutput(t, "log", "-1", "--format=%ct"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Unix(sec, 0)
}

// layoutImage extracts an archive and opens its only image with
// go-containerregistry's layout package, checking it is the one Build reported.
func layoutImage(t *testing.T, r Result) (v1.Image, error) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(r.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", r.Path, err)
		}
		if !filepath.IsLocal(h.Name) {
			return nil, fmt.Errorf("%s: entry %q leaves the layout", r.Path, h.Name)
		}
		path := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(path, b, 0o644)
			}
		default:
			err = fmt.Errorf("entry %q has type %q, want files and directories", h.Name, h.Typeflag)
		}
		if err != nil {
			return nil, fmt.Errorf("extracting %s: %w", r.Path, err)
		}
	}
	index, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("opening %s as an OCI layout: %w", r.Path, err)
	}
	img, err := index.Image(r.Digest)
	if err != nil {
		return nil, fmt.Errorf("%s has no image %s: %w", r.Path, r.Digest, err)
	}
	if d, err := img.Digest(); err != nil || d != r.Digest {
		return nil, fmt.Errorf("%s: image digest %s (%v), want %s", r.Path, d, err, r.Digest)
	}
	return img, nil
}

// TestIndexHoldsWhatBuildBuilds: the image of an architecture in the index
// make release pushes is the image make images writes, digest for digest,
// and its SBOM refers to it and names the installed ca-certificates.
func TestIndexHoldsWhatBuildBuilds(t *testing.T) {
	single := builtImages(t)
	caVersion, _ := dpkgQueryCA(t)
	indexes, err := BuildIndex(t.Context(), Options{OutDir: t.TempDir()}, []string{runtime.GOARCH})
	if err != nil {
		t.Fatal(err)
	}
	for i, idx := range indexes {
		if idx.Reference != single[i].Reference {
			t.Errorf("index %s, image %s", idx.Reference, single[i].Reference)
		}
		if len(idx.Platforms) != 1 || idx.Platforms[0].Digest != single[i].Digest || idx.Platforms[0].Arch != runtime.GOARCH {
			t.Errorf("%s: the index holds %v, want linux/%s %s", idx.Reference, idx.Platforms, runtime.GOARCH, single[i].Digest)
		}
		files, err := readLayoutArchive(idx.Path)
		if err != nil {
			t.Fatal(err)
		}
		var sbom v1.Manifest
		if err := json.Unmarshal(files["blobs/sha256/"+idx.Platforms[0].SBOM.Hex], &sbom); err != nil {
			t.Fatal(err)
		}
		if sbom.Subject == nil || sbom.Subject.Digest != single[i].Digest || sbom.ArtifactType != SBOMMediaType {
			t.Errorf("%s: the SBOM manifest's subject is %v, artifact type %q", idx.Reference, sbom.Subject, sbom.ArtifactType)
		}
		if len(sbom.Layers) != 1 {
			t.Fatalf("%s: the SBOM manifest has %d layers, want 1", idx.Reference, len(sbom.Layers))
		}
		var doc spdxDocument
		if err := json.Unmarshal(files["blobs/sha256/"+sbom.Layers[0].Digest.Hex], &doc); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(doc.Packages, func(p spdxPackage) bool { return p.Name == "ca-certificates" && p.VersionInfo == caVersion }) {
			t.Errorf("%s: the SBOM names no ca-certificates %s, the installed version: %+v", idx.Reference, caVersion, doc.Packages)
		}
	}
	if _, err := BuildIndex(t.Context(), Options{OutDir: t.TempDir()}, []string{"amd64", "amd64"}); err == nil || !strings.Contains(err.Error(), `"amd64" given twice`) {
		t.Errorf("an architecture given twice: %v", err)
	}
}

// dpkgQueryCA is the version and architecture of the installed
// ca-certificates as dpkg-query prints them, which readCAPackage must
// agree with without running it.
func dpkgQueryCA(t *testing.T) (version, arch string) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "dpkg-query", "-W", "-f=${Version} ${Architecture}", "ca-certificates").Output()
	if err != nil {
		t.Fatalf("dpkg-query -W ca-certificates: %v; the SBOM names the package of the image's CA bundle", err)
	}
	if _, err := fmt.Sscan(string(out), &version, &arch); err != nil {
		t.Fatalf("dpkg-query printed %q: %v", out, err)
	}
	return version, arch
}

// TestCAPackage: the ca-certificates read from the dpkg status file is the
// one dpkg-query reports; a status file without it installed fails by
// name, and BuildIndex fails with it before building.
func TestCAPackage(t *testing.T) {
	version, arch := dpkgQueryCA(t)
	p, err := readCAPackage(DpkgStatus)
	if err != nil {
		t.Fatal(err)
	}
	if want := (debPackage{Name: "ca-certificates", Version: version, Arch: arch}); p != want {
		t.Errorf("read %+v from %s, dpkg-query says %+v", p, DpkgStatus, want)
	}
	if got, want := (debPackage{Name: "ca-certificates", Version: "1:2.3+deb1~x", Arch: "all"}).purl(), "pkg:deb/debian/ca-certificates@1%3A2.3%2Bdeb1~x?arch=all"; got != want {
		t.Errorf("purl %s, want %s", got, want)
	}

	status := filepath.Join(t.TempDir(), "status")
	removed := "Package: openssl\nStatus: install ok installed\nVersion: 3.0.0\nArchitecture: amd64\n\n" +
		"Package: ca-certificates\nStatus: deinstall ok config-files\nVersion: 20250419\nArchitecture: all\n"
	if err := os.WriteFile(status, []byte(removed), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readCAPackage(status); err == nil || !strings.Contains(err.Error(), status) || !strings.Contains(err.Error(), "no installed ca-certificates") {
		t.Errorf("a status file with ca-certificates removed: %v, want an error naming %s and ca-certificates", err, status)
	}
	out := t.TempDir()
	if _, err := BuildIndex(t.Context(), Options{OutDir: out, DpkgStatus: status}, []string{runtime.GOARCH}); err == nil || !strings.Contains(err.Error(), "no installed ca-certificates") {
		t.Errorf("BuildIndex without ca-certificates installed: %v, want it refused", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) > 0 {
		t.Errorf("BuildIndex wrote %d files to %s before refusing", len(entries), out)
	}
}

// TestCleanRevision: a clean checkout gives its commit; a dirty one an
// error naming the first few changes (an untracked file marked, a rename by
// its new name), counting the rest and leaving ignored files out.
func TestCleanRevision(t *testing.T) {
	root := t.TempDir()
	gitIn := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "git", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(),
			"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.invalid",
			"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.invalid")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, ".gitignore"), []byte("*.log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write("a.txt")
	write("b.txt")
	gitIn("init", "--quiet")
	gitIn("add", "--all")
	gitIn("-c", "commit.gpgsign=false", "commit", "--quiet", "--no-verify", "--message=init")
	write("build.log")

	rev, err := CleanRevision(t.Context(), root)
	if err != nil {
		t.Fatalf("a clean checkout with an ignored file: %v", err)
	}
	if want := gitIn("rev-parse", "HEAD"); rev != want {
		t.Errorf("CleanRevision gave %s, HEAD is %s", rev, want)
	}

	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn("mv", "b.txt", "c.txt")
	for i := 1; i <= 5; i++ {
		write(fmt.Sprintf("u%d.txt", i))
	}
	_, err = CleanRevision(t.Context(), root)
	var dirty *DirtyTreeError
	if !errors.As(err, &dirty) {
		t.Fatalf("a dirty checkout: %v, want a DirtyTreeError", err)
	}
	want := []string{"a.txt", "c.txt", "u1.txt (untracked)", "u2.txt (untracked)", "u3.txt (untracked)", "u4.txt (untracked)", "u5.txt (untracked)"}
	if !slices.Equal(dirty.Paths, want) {
		t.Errorf("dirty paths %q, want %q", dirty.Paths, want)
	}
	msg := err.Error()
	for _, s := range []string{root, "a.txt, c.txt, u1.txt (untracked), u2.txt (untracked), u3.txt (untracked) and 2 more", "commit or stash"} {
		if !strings.Contains(msg, s) {
			t.Errorf("the error %q does not say %q", msg, s)
		}
	}
}
