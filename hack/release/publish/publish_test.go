package publish

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	appsv1 "k8s.io/api/apps/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	helmchart "helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"

	"github.com/c5c3/glance-operator/hack/images/ociimage"
	"github.com/c5c3/glance-operator/hack/release/publish/publishtest"
	"github.com/c5c3/glance-operator/test/chart"
	"github.com/c5c3/glance-operator/test/controlplane"
)

// loopbackRegistry serves go-containerregistry's registry, with the
// referrers API, on loopback; it returns the registry's HOST:PORT/c5c3.
func loopbackRegistry(t *testing.T) (string, ociimage.Distribution) {
	t.Helper()
	srv := httptest.NewServer(ggcrregistry.New(
		ggcrregistry.WithReferrersSupport(true),
		ggcrregistry.Logger(log.New(io.Discard, "", 0)),
	))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://") + "/c5c3", ociimage.Distribution{Base: srv.URL, Client: srv.Client()}
}

// publish releases the source tree at root to reg, signed by signer.
func publish(t *testing.T, reg, root string, signer *Signer) Release {
	t.Helper()
	rel, err := Publish(t.Context(), Options{
		Registry:       reg,
		PlainHTTP:      true,
		RegistryConfig: filepath.Join(t.TempDir(), "config.json"),
		Images:         ociimage.Options{OutDir: t.TempDir(), ModuleRoot: root},
		Signer:         signer,
	})
	if err != nil {
		t.Fatalf("publishing to %s: %v", reg, err)
	}
	return rel
}

// runGit runs git in dir and returns its output.
func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return publishtest.Git(t, dir, args...)
}

// snapshot is the module's working tree, committed in a repository of its
// own (publishtest.Snapshot).
func snapshot(t *testing.T) string {
	t.Helper()
	src, err := ociimage.ModuleRoot(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	return publishtest.Snapshot(t, src)
}

// TestPublish releases to a registry on loopback twice and checks what a
// platform team pulls: an index of both architectures for each image, an
// SPDX SBOM referring to each architecture's image that names the Go modules
// its binary was built from and the Debian package of its CA bundle, the
// chart with the indexes pinned, the static manifests the chart renders, and
// the signature and SLSA provenance of each, the same digests from the
// second release. test/release verifies them as cosign does.
func TestPublish(t *testing.T) {
	reg, dist := loopbackRegistry(t)
	root := snapshot(t)
	hostCA := hostCABundle(t)
	keyPath, pub := cosignKey(t, "release")
	signer, err := LoadSigner(keyPath, []byte("release"))
	if err != nil {
		t.Fatal(err)
	}
	revision := strings.TrimSpace(runGit(t, root, "rev-parse", "HEAD"))
	rel := publish(t, reg, root, signer)
	t.Log("\n" + rel.String())
	ctx := t.Context()

	if len(rel.Images) != len(ociimage.Images) {
		t.Fatalf("released %d images, want %d", len(rel.Images), len(ociimage.Images))
	}
	for i, img := range rel.Images {
		src := ociimage.Images[i]
		t.Run(img.Name, func(t *testing.T) {
			repo := "c5c3/" + img.Name
			_, tag, _ := strings.Cut(img.Tagged, repo+":")
			body, digest, err := dist.Get(ctx, repo, "manifests/"+tag, string(types.OCIImageIndex))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(img.Reference, "@"+digest) {
				t.Errorf("the tag %s is %s, but the release printed %s", img.Tagged, digest, img.Reference)
			}
			var index v1.IndexManifest
			if err := json.Unmarshal(body, &index); err != nil {
				t.Fatal(err)
			}
			var platforms []string
			for _, m := range index.Manifests {
				platforms = append(platforms, m.Platform.String())
			}
			if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
				t.Errorf("the index lists %v, want %v", platforms, want)
			}

			for j, p := range img.Platforms {
				if index.Manifests[j].Digest != p.Digest {
					t.Errorf("linux/%s is %s in the index, %s in the release", p.Arch, index.Manifests[j].Digest, p.Digest)
				}
				doc := referredSBOM(t, dist, repo, p)
				modules := goListModules(t, root, src.Package, p.Arch)
				if got := sbomModules(t, doc); !slices.Equal(got, modules) {
					t.Errorf("linux/%s: the SBOM names the modules\n%v\nwant, as go list -deps gives them,\n%v", p.Arch, got, modules)
				}
				if err := checkCABundle(doc, hostCA); err != nil {
					t.Errorf("linux/%s: %v", p.Arch, err)
				}
			}

			st := checkSigned(t, reg, repo, digest, img.Signed, pub)
			var modules []string
			for _, p := range img.Platforms {
				modules = append(modules, goListModules(t, root, src.Package, p.Arch)...)
			}
			slices.Sort(modules)
			modules = slices.Compact(modules)
			checkImageProvenance(t, st, reg, revision, src, modules, hostCA)
		})
	}

	t.Run("chart", func(t *testing.T) {
		rc, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptWriter(io.Discard))
		if err != nil {
			t.Fatal(err)
		}
		ref := strings.TrimPrefix(rel.Chart, "oci://") + ":" + rel.ChartVersion
		pulled, err := rc.Pull(ref)
		if err != nil {
			t.Fatal(err)
		}
		if pulled.Manifest.Digest != rel.ChartDigest {
			t.Errorf("%s is %s, the release printed %s", ref, pulled.Manifest.Digest, rel.ChartDigest)
		}
		archive, err := os.ReadFile(rel.ChartArchive)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(pulled.Chart.Data, archive) {
			t.Errorf("the pushed chart differs from %s", rel.ChartArchive)
		}
		c, err := loader.LoadArchive(bytes.NewReader(pulled.Chart.Data))
		if err != nil {
			t.Fatal(err)
		}
		local, err := chart.Load()
		if err != nil {
			t.Fatal(err)
		}
		if c.Metadata.AppVersion != local.Metadata.AppVersion || c.Metadata.Version != local.Metadata.Version {
			t.Errorf("the chart is %s (appVersion %s), want Chart.yaml's %s (%s)", c.Metadata.Version, c.Metadata.AppVersion, local.Metadata.Version, local.Metadata.AppVersion)
		}
		// The defaults of the packaged chart run the released indexes.
		r, err := chart.RenderChart(c, nil, chart.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range r.Select("Deployment") {
			var dep appsv1.Deployment
			if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(d.Object, &dep); err != nil {
				t.Fatal(err)
			}
			image := dep.Spec.Template.Spec.Containers[0].Image
			if !slices.ContainsFunc(rel.Images, func(img Image) bool { return img.Reference == image }) {
				t.Errorf("Deployment %s runs %s, want one of the released indexes by digest", dep.Name, image)
			}
		}
		var listed []map[string]string
		if err := yaml.Unmarshal([]byte(c.Metadata.Annotations[annotationImages]), &listed); err != nil {
			t.Fatal(err)
		}
		for i, img := range rel.Images {
			_, digest, _ := strings.Cut(img.Reference, "@")
			if want := img.Tagged + "@" + digest; i >= len(listed) || listed[i]["image"] != want {
				t.Errorf("Artifact Hub's images %v, want %s", listed, want)
			}
		}
		// Everything of values.yaml but the pinned scalars is as written.
		if got, want := unpinned(t, c), unpinned(t, local); got != want {
			t.Errorf("values.yaml changed beyond the images:\n%s\nwant\n%s", got, want)
		}
		// Artifact Hub's prerelease annotation follows the version.
		v, err := semver.StrictNewVersion(c.Metadata.Version)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.Metadata.Annotations["artifacthub.io/prerelease"], strconv.FormatBool(v.Prerelease() != ""); got != want {
			t.Errorf("the chart %s has artifacthub.io/prerelease %q, want %q", c.Metadata.Version, got, want)
		}

		st := checkSigned(t, reg, "c5c3/charts/glance-operator", rel.ChartDigest, rel.ChartSigned, pub)
		checkDependencies(t, st, "the chart", rel.Images)
	})

	t.Run("manifests", func(t *testing.T) {
		repo := "c5c3/" + ManifestsRepository
		if want := reg + "/" + ManifestsRepository + ":" + rel.ChartVersion; rel.Manifests != want {
			t.Errorf("the manifests are at %s, want %s", rel.Manifests, want)
		}
		files := pullManifests(t, dist, repo, rel.ChartVersion, rel.ManifestsDigest)
		// What the chart's defaults render, as test/chart renders them for
		// the chart suites (test/release compares with the helm CLI).
		pulled, err := os.ReadFile(rel.ChartArchive)
		if err != nil {
			t.Fatal(err)
		}
		c, err := loader.LoadArchive(bytes.NewReader(pulled))
		if err != nil {
			t.Fatal(err)
		}
		r, err := chart.RenderChart(c, nil, chart.Options{ReleaseName: ManifestsReleaseName, Namespace: ManifestsNamespace})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(files[ManifestsFile]), strings.TrimSpace(r.Manifest)+"\n"; got != want {
			t.Errorf("%s is not what the chart renders with its defaults:\n%s", ManifestsFile, publishtest.LineDiff(got, want))
		}
		var crds []string
		for _, o := range r.Select("CustomResourceDefinition") {
			crds = append(crds, o.GetName())
		}
		objs, err := controlplane.DecodeObjects(files[CRDsFile])
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range objs {
			got = append(got, o.GetKind()+" "+o.GetName())
		}
		var want []string
		for _, n := range crds {
			want = append(want, "CustomResourceDefinition "+n)
		}
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("%s holds %v, want the rendered CRDs %v", CRDsFile, got, want)
		}
		if !strings.Contains(string(files[ManifestsFile]), string(files[CRDsFile])) {
			t.Errorf("%s is not the CRDs of %s as rendered", CRDsFile, ManifestsFile)
		}
		for _, img := range rel.Images {
			if !strings.Contains(string(files[ManifestsFile]), "image: "+img.Reference+"\n") {
				t.Errorf("%s does not run %s", ManifestsFile, img.Reference)
			}
		}
		for name, b := range files {
			local, err := os.ReadFile(filepath.Join(filepath.Dir(rel.ChartArchive), name))
			if err != nil || !bytes.Equal(local, b) {
				t.Errorf("%s differs from the file the release wrote (%v)", name, err)
			}
		}
		st := checkSigned(t, reg, repo, rel.ManifestsDigest, rel.ManifestsSigned, pub)
		checkDependencies(t, st, "the manifests", rel.Images)
	})

	t.Run("reproducible", func(t *testing.T) {
		again := publish(t, reg, root, signer)
		for i := range rel.Images {
			a, b := rel.Images[i], again.Images[i]
			if a.Reference != b.Reference || !slices.Equal(a.Platforms, b.Platforms) || a.Signed != b.Signed {
				t.Errorf("%s: released %s %v %s, then %s %v %s", a.Name, a.Reference, a.Platforms, a.Signed, b.Reference, b.Platforms, b.Signed)
			}
		}
		if again.ChartDigest != rel.ChartDigest || again.ChartSigned != rel.ChartSigned {
			t.Errorf("the chart was released as %s (%s), then as %s (%s)", rel.ChartDigest, rel.ChartSigned, again.ChartDigest, again.ChartSigned)
		}
		if again.ManifestsDigest != rel.ManifestsDigest || again.ManifestsSigned != rel.ManifestsSigned {
			t.Errorf("the manifests were released as %s (%s), then as %s (%s)", rel.ManifestsDigest, rel.ManifestsSigned, again.ManifestsDigest, again.ManifestsSigned)
		}
		first, err := os.ReadFile(rel.ChartArchive)
		if err != nil {
			t.Fatal(err)
		}
		second, err := os.ReadFile(again.ChartArchive)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Errorf("%s and %s differ", rel.ChartArchive, again.ChartArchive)
		}
	})
}

// TestPublishRefusesABadRegistry: the registry is checked before anything
// is built, and the error names it.
func TestPublishRefusesABadRegistry(t *testing.T) {
	for _, reg := range []string{"", "https://ghcr.io/c5c3", "ghcr.io/c5c3:v1", "ghcr.io//c5c3", "ghcr.io/C5C3"} {
		_, err := Publish(t.Context(), Options{Registry: reg, Images: ociimage.Options{OutDir: t.TempDir()}})
		if err == nil || !strings.Contains(err.Error(), "registry \""+reg+"\"") {
			t.Errorf("registry %q: %v, want it refused by name", reg, err)
		}
	}
}

// TestPublishRefusesADirtyTree: a source tree with a changed tracked file,
// a staged new file or an untracked file is refused before anything is
// built, the error naming them; an ignored file does not count.
func TestPublishRefusesADirtyTree(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("tracked.txt", "committed\n")
	write(".gitignore", "*.log\n")
	publishtest.CommitAll(t, root)
	write("tracked.txt", "changed\n")
	write("staged.txt", "staged\n")
	runGit(t, root, "add", "staged.txt")
	write("notes.txt", "untracked\n")
	write("build.log", "ignored\n")

	out := t.TempDir()
	_, err := Publish(t.Context(), Options{
		Registry:       "127.0.0.1:1/c5c3",
		PlainHTTP:      true,
		RegistryConfig: filepath.Join(t.TempDir(), "config.json"),
		Images:         ociimage.Options{OutDir: out, ModuleRoot: root},
	})
	if err == nil {
		t.Fatal("Publish released a dirty tree")
	}
	t.Log(err)
	msg := err.Error()
	for _, want := range []string{root, "tracked.txt", "staged.txt", "notes.txt (untracked)", "commit or stash"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error %q does not name %q", msg, want)
		}
	}
	if strings.Contains(msg, "build.log") {
		t.Errorf("the error %q names the ignored build.log", msg)
	}
	if entries, _ := os.ReadDir(out); len(entries) > 0 {
		t.Errorf("Publish wrote %d files to %s before refusing", len(entries), out)
	}
}

// spdxDocument is what the test reads of an SPDX 2.3 JSON document.
type spdxDocument struct {
	SPDXVersion   string             `json:"spdxVersion"`
	Packages      []spdxPackage      `json:"packages"`
	Files         []spdxFile         `json:"files"`
	Relationships []spdxRelationship `json:"relationships"`
}

type spdxPackage struct {
	SPDXID       string            `json:"SPDXID"`
	Name         string            `json:"name"`
	VersionInfo  string            `json:"versionInfo"`
	ExternalRefs []spdxExternalRef `json:"externalRefs"`
}

type spdxExternalRef struct {
	Type    string `json:"referenceType"`
	Locator string `json:"referenceLocator"`
}

type spdxFile struct {
	SPDXID    string         `json:"SPDXID"`
	FileName  string         `json:"fileName"`
	Checksums []spdxChecksum `json:"checksums"`
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

// caBundle is the build host's CA bundle and the package dpkg says it
// comes from.
type caBundle struct {
	Version, Arch, SHA256 string
}

// hostCABundle asks dpkg-query, not the dpkg status file Publish reads, for
// the installed ca-certificates.
func hostCABundle(t *testing.T) caBundle {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "dpkg-query", "-W", "-f=${Version} ${Architecture}", "ca-certificates").Output()
	if err != nil {
		t.Fatalf("dpkg-query -W ca-certificates: %v; the release names the package of the image's CA bundle", err)
	}
	var ca caBundle
	if _, err := fmt.Sscan(string(out), &ca.Version, &ca.Arch); err != nil {
		t.Fatalf("dpkg-query printed %q: %v", out, err)
	}
	b, err := os.ReadFile(ociimage.CABundle)
	if err != nil {
		t.Fatal(err)
	}
	ca.SHA256 = fmt.Sprintf("%x", sha256.Sum256(b))
	return ca
}

// checkCABundle: the SBOM names the package ca-certificates at the host's
// version, by purl, as a dependency of the binary, and the bundle's file by
// its SHA-256 as generated from it.
func checkCABundle(doc spdxDocument, want caBundle) error {
	i := slices.IndexFunc(doc.Packages, func(p spdxPackage) bool { return p.Name == "ca-certificates" })
	if i < 0 {
		return errors.New("the SBOM names no package ca-certificates")
	}
	p := doc.Packages[i]
	if p.VersionInfo != want.Version {
		return fmt.Errorf("the SBOM names ca-certificates %s, dpkg-query says %s is installed", p.VersionInfo, want.Version)
	}
	if len(p.ExternalRefs) != 1 || p.ExternalRefs[0].Type != "purl" {
		return fmt.Errorf("ca-certificates has the external references %+v, want one purl", p.ExternalRefs)
	}
	purl := p.ExternalRefs[0].Locator
	rest, ok := strings.CutPrefix(purl, "pkg:deb/debian/ca-certificates@")
	version, qualifiers, _ := strings.Cut(rest, "?")
	if v, err := url.PathUnescape(version); !ok || err != nil || v != want.Version || qualifiers != "arch="+want.Arch {
		return fmt.Errorf("ca-certificates has the purl %s, want pkg:deb/debian/ca-certificates@%s?arch=%s", purl, want.Version, want.Arch)
	}
	if !slices.Contains(doc.Relationships, spdxRelationship{Element: doc.Packages[0].SPDXID, Type: "DEPENDS_ON", Related: p.SPDXID}) {
		return fmt.Errorf("the binary %s does not depend on ca-certificates %s: %v", doc.Packages[0].SPDXID, p.SPDXID, doc.Relationships)
	}
	for _, f := range doc.Files {
		if f.FileName != "."+ociimage.CABundle {
			continue
		}
		if !slices.Contains(f.Checksums, spdxChecksum{Algorithm: "SHA256", Value: want.SHA256}) {
			return fmt.Errorf("the SBOM gives %s the checksums %+v, want SHA256 %s", f.FileName, f.Checksums, want.SHA256)
		}
		if !slices.Contains(doc.Relationships, spdxRelationship{Element: f.SPDXID, Type: "GENERATED_FROM", Related: p.SPDXID}) {
			return fmt.Errorf("the SBOM does not say %s is generated from ca-certificates: %v", f.FileName, doc.Relationships)
		}
		return nil
	}
	return fmt.Errorf("the SBOM lists no file .%s: %+v", ociimage.CABundle, doc.Files)
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// referredSBOM finds the SBOM of a platform's image through the registry's
// referrers API and returns its SPDX document.
func referredSBOM(t *testing.T, dist ociimage.Distribution, repo string, p ociimage.Platform) spdxDocument {
	t.Helper()
	ctx := t.Context()
	body, _, err := dist.Get(ctx, repo, "referrers/"+p.Digest.String(), "")
	if err != nil {
		t.Fatal(err)
	}
	var referrers v1.IndexManifest
	if err := json.Unmarshal(body, &referrers); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(referrers.Manifests, func(d v1.Descriptor) bool { return d.Digest == p.SBOM }) {
		t.Fatalf("linux/%s: the referrers of %s are %v, want the SBOM %s", p.Arch, p.Digest, referrers.Manifests, p.SBOM)
	}
	body, _, err = dist.Get(ctx, repo, "manifests/"+p.SBOM.String(), string(types.OCIManifestSchema1))
	if err != nil {
		t.Fatal(err)
	}
	var m v1.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if m.ArtifactType != ociimage.SBOMMediaType || m.Subject == nil || m.Subject.Digest != p.Digest || len(m.Layers) != 1 || m.Layers[0].MediaType != ociimage.SBOMMediaType {
		t.Fatalf("linux/%s: the SBOM manifest is %s", p.Arch, body)
	}
	blob, _, err := dist.Get(ctx, repo, "blobs/"+m.Layers[0].Digest.String(), "")
	if err != nil {
		t.Fatal(err)
	}
	var doc spdxDocument
	if err := json.Unmarshal(blob, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || !slices.Contains(doc.Relationships, spdxRelationship{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: doc.Packages[0].SPDXID}) {
		t.Fatalf("linux/%s: not an SPDX 2.3 document describing the binary: %s", p.Arch, blob)
	}
	return doc
}

// sbomModules are the Go modules an SBOM names, PATH@VERSION, sorted: the
// packages after the binary with a Go package URL.
func sbomModules(t *testing.T, doc spdxDocument) []string {
	t.Helper()
	var modules []string
	for _, p := range doc.Packages[1:] {
		if !slices.ContainsFunc(p.ExternalRefs, func(r spdxExternalRef) bool {
			return r.Type == "purl" && strings.HasPrefix(r.Locator, "pkg:golang/")
		}) {
			continue
		}
		if p.Name == "stdlib" {
			if p.VersionInfo != runtime.Version() {
				t.Errorf("the SBOM names the Go standard library %s, want %s", p.VersionInfo, runtime.Version())
			}
			continue
		}
		modules = append(modules, p.Name+"@"+p.VersionInfo)
	}
	slices.Sort(modules)
	return modules
}

// goListModules are the modules, PATH@VERSION and sorted, that provide the
// packages of a binary of the module at root built for linux/arch, as go
// list tells them.
func goListModules(t *testing.T, root, pkg, arch string) []string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f",
		"{{with .Module}}{{if not .Main}}{{with .Replace}}{{.Path}}@{{.Version}}{{else}}{{.Path}}@{{.Version}}{{end}}{{end}}{{end}}", pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var modules []string
	for _, m := range strings.Fields(string(out)) {
		if !slices.Contains(modules, m) {
			modules = append(modules, m)
		}
	}
	slices.Sort(modules)
	if len(modules) < 10 {
		t.Fatalf("go list names %d modules for %s: %v", len(modules), pkg, modules)
	}
	return modules
}

// unpinned is a chart's values.yaml with the images' repositories and
// digests set to one placeholder.
func unpinned(t *testing.T, c *helmchart.Chart) string {
	t.Helper()
	values, ok := rawFile(c, "values.yaml")
	if !ok {
		t.Fatal("no values.yaml")
	}
	set := map[string]string{}
	for _, img := range ociimage.Images {
		set[img.Component+".image.repository"] = "x"
		set[img.Component+".image.digest"] = "x"
	}
	out, err := setScalars(values, set)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
