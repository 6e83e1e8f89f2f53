// Package publish releases glance-operator to an OCI registry without Docker:
// both images as multi-architecture image indexes with an SPDX SBOM referring
// to each architecture's image, the chart, its appVersion and image digests
// pinned, as an OCI artifact that `helm install oci://…` installs, and the
// static manifests the chart renders with its defaults as an OCI artifact of
// two YAML files. With a Signer, each index, the chart and the manifests are
// signed in cosign's layout, with an SLSA provenance attestation each.
//
// Everything pushed is built from the commit, so a working tree with
// uncommitted changes is refused, and is byte-for-byte the same for the same
// commit, Go toolchain, ca-certificates package of the build host and
// architectures: the images (hack/images/ociimage), the chart archive
// (written here with fixed tar headers), the chart's OCI manifest (its
// created annotation is the commit time), the manifests' artifact and the
// provenance. Signatures are not (ECDSA's are randomized), but a signature
// or attestation the registry already has from the same key is kept, so
// releasing a commit again leaves what it signed as it was.
package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/helmpath"
	"helm.sh/helm/v3/pkg/registry"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/oci"
	orasregistry "oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"

	"github.com/c5c3/glance-operator/hack/images/ociimage"
)

// Arches are the architectures a release builds by default.
var Arches = []string{"amd64", "arm64"}

// Options configures Publish.
type Options struct {
	// Registry is where the release goes, HOST[:PORT][/NAMESPACE]: the
	// images become REGISTRY/NAME, the chart REGISTRY/charts/glance-operator
	// and the static manifests REGISTRY/manifests/glance-operator.
	Registry string
	// PlainHTTP talks HTTP instead of HTTPS to the registry (a registry on
	// loopback).
	PlainHTTP bool
	// RegistryConfig is the credentials file `helm registry login` writes;
	// empty means Helm's default. Both the images and the chart are pushed
	// with its credentials.
	RegistryConfig string
	// Arches are the images' architectures; empty means Arches.
	Arches []string
	// Images configures the image builds; its OutDir receives the image
	// archives, the chart archive and the static manifests. Its ModuleRoot
	// is the source tree released, images and chart; it must be a git
	// checkout without uncommitted changes. Empty means the module of the
	// working directory.
	Images ociimage.Options
	// UncommittedTree publishes the tree as it is, committed or not, as
	// make images builds it: for a suite that installs the tree it tests.
	// make release never sets it: a release is its commit alone.
	UncommittedTree bool
	// Signer signs each image index, the chart and the manifests and
	// attests their provenance; nil publishes them unsigned (the real-node
	// suite). A signed release must be a commit: not with UncommittedTree.
	Signer *Signer
}

// Signed is an artifact's signature and provenance attestation, the
// digests of their manifests, under the tags sha256-HEX.sig and .att of
// its repository; empty when the release is unsigned.
type Signed struct {
	Signature, Provenance string
}

func (s Signed) String() string {
	if s.Signature == "" {
		return "unsigned"
	}
	return "signature " + s.Signature + ", provenance " + s.Provenance
}

// Image is one published image index.
type Image struct {
	Name string
	// Reference is REGISTRY/NAME@DIGEST, the index by digest.
	Reference string
	// Tagged is REGISTRY/NAME:TAG.
	Tagged    string
	Platforms []ociimage.Platform
	Signed    Signed
}

// Release is what Publish pushed.
type Release struct {
	Images []Image
	// Chart is oci://REGISTRY/charts/glance-operator, what `helm install`
	// takes with ChartVersion.
	Chart        string
	ChartVersion string
	// ChartDigest is the chart's OCI manifest digest.
	ChartDigest string
	// ChartArchive is the packaged chart in Images.OutDir.
	ChartArchive string
	ChartSigned  Signed
	// Manifests is REGISTRY/manifests/glance-operator:VERSION, the static
	// manifests' artifact; ManifestsDigest its manifest's digest. The files
	// are in Images.OutDir too.
	Manifests       string
	ManifestsDigest string
	ManifestsSigned Signed
}

// String is what `make release` prints.
func (r Release) String() string {
	var b strings.Builder
	for _, img := range r.Images {
		fmt.Fprintf(&b, "%s\n  %s\n", img.Tagged, img.Reference)
		for _, p := range img.Platforms {
			fmt.Fprintf(&b, "  linux/%s %s, SBOM %s\n", p.Arch, p.Digest, p.SBOM)
		}
		fmt.Fprintf(&b, "  %s\n", img.Signed)
	}
	fmt.Fprintf(&b, "%s --version %s\n  %s  %s\n  %s\n", r.Chart, r.ChartVersion, r.ChartDigest, r.ChartArchive, r.ChartSigned)
	if r.Manifests != "" {
		fmt.Fprintf(&b, "manifests %s (%s, %s)\n  %s\n  %s\n", r.Manifests, ManifestsFile, CRDsFile, r.ManifestsDigest, r.ManifestsSigned)
	}
	return b.String()
}

// Publish builds the images, packages the chart with their digests pinned
// and renders its static manifests, then pushes the images with their SBOMs,
// the chart and the manifests, each signed with its provenance attested when
// o.Signer is set. It refuses a source tree with uncommitted changes, before
// building and again before pushing.
func Publish(ctx context.Context, o Options) (Release, error) {
	registryHost, err := parseRegistry(o.Registry)
	if err != nil {
		return Release{}, err
	}
	if o.Signer != nil && o.UncommittedTree {
		return Release{}, errors.New("a signed release is its commit alone: a Signer with UncommittedTree")
	}
	if len(o.Arches) == 0 {
		o.Arches = Arches
	}
	if o.RegistryConfig == "" {
		o.RegistryConfig = helmpath.ConfigPath("registry/config.json")
	}
	creds, err := credentials.NewStore(o.RegistryConfig, credentials.StoreOptions{})
	if err != nil {
		return Release{}, fmt.Errorf("reading the registry credentials: %w", err)
	}
	client := &auth.Client{Client: retry.DefaultClient, Cache: auth.NewCache(), Credential: credentials.Credential(creds)}

	if o.Images.ModuleRoot == "" {
		if o.Images.ModuleRoot, err = ociimage.ModuleRoot(ctx, o.Images.Go); err != nil {
			return Release{}, err
		}
	}
	// The images' labels and SBOMs name the commit, so nothing but the
	// commit may go into them.
	revision, err := cleanRevision(ctx, o)
	if err != nil {
		return Release{}, fmt.Errorf("refusing to release: %w", err)
	}
	built, err := ociimage.BuildIndex(ctx, o.Images, o.Arches)
	if err != nil {
		return Release{}, err
	}
	// The chart pins the digests built; pushIndex checks the registry
	// stores them as such.
	pinned := make([]Image, len(built))
	for i, b := range built {
		pinned[i] = Image{Name: ociimage.Images[i].Name, Reference: o.Registry + "/" + ociimage.Images[i].Name + "@" + b.Digest.String()}
	}
	chart, err := packageChart(o.Images.ModuleRoot, o.Registry, pinned, built[0].Created)
	if err != nil {
		return Release{}, fmt.Errorf("packaging the chart: %w", err)
	}
	manifests, err := renderManifests(chart.Archive)
	if err != nil {
		return Release{}, fmt.Errorf("rendering the chart's manifests: %w", err)
	}
	prov := provenanceInfo{registry: o.Registry, revision: revision, sourceDateEpoch: o.Images.SourceDateEpoch}
	var statements [][]byte
	if o.Signer != nil {
		for i, b := range built {
			st, goVersion, err := prov.indexProvenance(ctx, o.Registry+"/"+ociimage.Images[i].Name, ociimage.Images[i], b)
			if err != nil {
				return Release{}, fmt.Errorf("the provenance of %s: %w", ociimage.Images[i].Name, err)
			}
			statements = append(statements, st)
			// The chart and the manifests are of the images' toolchain.
			prov.goVersion = goVersion
		}
	}
	// Everything is read from the tree now; it must still be the commit
	// checked before the build.
	after, err := cleanRevision(ctx, o)
	if err != nil {
		return Release{}, fmt.Errorf("refusing to release, the tree changed during the build: %w", err)
	}
	if after != revision {
		return Release{}, fmt.Errorf("refusing to release: %s moved from commit %s to %s during the build", o.Images.ModuleRoot, revision, after)
	}

	var rel Release
	for i, b := range built {
		img, err := pushIndex(ctx, client, o, ociimage.Images[i].Name, b)
		if err != nil {
			return Release{}, fmt.Errorf("pushing %s: %w", ociimage.Images[i].Name, err)
		}
		if o.Signer != nil {
			if img.Signed, err = signAndAttest(ctx, client, o, ociimage.Images[i].Name, digest.Digest(b.Digest.String()), statements[i]); err != nil {
				return Release{}, err
			}
		}
		rel.Images = append(rel.Images, img)
	}
	rel.ChartVersion = chart.Version
	rel.ChartArchive = filepath.Join(o.Images.OutDir, chart.Name+"-"+chart.Version+".tgz")
	if err := os.WriteFile(rel.ChartArchive, chart.Archive, 0o644); err != nil {
		return Release{}, err
	}
	helmOpts := []registry.ClientOption{
		registry.ClientOptCredentialsFile(o.RegistryConfig),
		registry.ClientOptWriter(io.Discard),
		registry.ClientOptHTTPClient(&http.Client{Transport: retry.DefaultClient.Transport}),
	}
	if o.PlainHTTP {
		helmOpts = append(helmOpts, registry.ClientOptPlainHTTP())
	}
	helm, err := registry.NewClient(helmOpts...)
	if err != nil {
		return Release{}, err
	}
	chartRepo := "charts/" + chart.Name
	ref := o.Registry + "/" + chartRepo
	pushed, err := helm.Push(chart.Archive, ref+":"+chart.Version,
		registry.PushOptStrictMode(true),
		registry.PushOptCreationTime(chart.Created.Format("2006-01-02T15:04:05Z")))
	if err != nil {
		return Release{}, fmt.Errorf("pushing the chart to %s: %w", registryHost, err)
	}
	rel.Chart = "oci://" + ref
	rel.ChartDigest = pushed.Manifest.Digest
	images := make([]resource, len(rel.Images))
	for i, img := range rel.Images {
		images[i] = resource{Name: img.Name, URI: img.Reference, Digest: digestSet(img.Reference)}
	}
	if o.Signer != nil {
		st, err := prov.statement(ref, digest.Digest(rel.ChartDigest),
			externalParameters{Artifact: "chart " + chart.Name, Version: chart.Version}, internalParameters{}, images)
		if err != nil {
			return Release{}, err
		}
		if rel.ChartSigned, err = signAndAttest(ctx, client, o, chartRepo, digest.Digest(rel.ChartDigest), st); err != nil {
			return Release{}, err
		}
	}

	for name, b := range map[string][]byte{ManifestsFile: manifests.All, CRDsFile: manifests.CRDs} {
		if err := os.WriteFile(filepath.Join(o.Images.OutDir, name), b, 0o644); err != nil {
			return Release{}, err
		}
	}
	repo, err := newRepository(client, o, ManifestsRepository)
	if err != nil {
		return Release{}, err
	}
	desc, err := pushManifests(ctx, repo, manifests, chart.Version, revision, chart.Created)
	if err != nil {
		return Release{}, fmt.Errorf("pushing the manifests: %w", err)
	}
	rel.Manifests = o.Registry + "/" + ManifestsRepository + ":" + chart.Version
	rel.ManifestsDigest = desc.Digest.String()
	if o.Signer != nil {
		st, err := prov.statement(o.Registry+"/"+ManifestsRepository, desc.Digest,
			externalParameters{Artifact: "manifests of chart " + chart.Name, Version: chart.Version,
				ReleaseName: ManifestsReleaseName, Namespace: ManifestsNamespace, KubeVersion: ManifestsKubeVersion},
			internalParameters{},
			append([]resource{{Name: "chart " + chart.Name, URI: rel.Chart + ":" + chart.Version, Digest: digestSet("@" + rel.ChartDigest)}}, images...))
		if err != nil {
			return Release{}, err
		}
		if rel.ManifestsSigned, err = signAndAttest(ctx, client, o, ManifestsRepository, desc.Digest, st); err != nil {
			return Release{}, err
		}
	}
	return rel, nil
}

// signAndAttest signs the manifest subject of REGISTRY/name and attests
// its provenance statement.
func signAndAttest(ctx context.Context, client *auth.Client, o Options, name string, subject digest.Digest, statement []byte) (Signed, error) {
	repo, err := newRepository(client, o, name)
	if err != nil {
		return Signed{}, err
	}
	sig, err := o.Signer.sign(ctx, repo, o.Registry+"/"+name, subject)
	if err != nil {
		return Signed{}, err
	}
	att, err := o.Signer.attest(ctx, repo, subject, SLSAProvenanceType, statement)
	if err != nil {
		return Signed{}, err
	}
	return Signed{Signature: sig.String(), Provenance: att.String()}, nil
}

// digestSet is the in-toto digest set of a reference's …@ALGORITHM:HEX.
func digestSet(ref string) map[string]string {
	_, d, _ := strings.Cut(ref, "@")
	alg, hex, _ := strings.Cut(d, ":")
	return map[string]string{alg: hex}
}

// newRepository is REGISTRY/name, with the release's credentials.
func newRepository(client *auth.Client, o Options, name string) (*remote.Repository, error) {
	repo, err := remote.NewRepository(o.Registry + "/" + name)
	if err != nil {
		return nil, err
	}
	repo.PlainHTTP = o.PlainHTTP
	repo.Client = client
	return repo, nil
}

// parseRegistry checks HOST[:PORT][/NAMESPACE] and returns the host.
func parseRegistry(r string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("registry %q: %s; give HOST[:PORT][/NAMESPACE], such as ghcr.io/c5c3", r, why)
	}
	if r == "" {
		return bad("empty")
	}
	if strings.Contains(r, "://") {
		return bad("no scheme is taken")
	}
	// The registry is valid when a chart reference under it is.
	ref, err := orasregistry.ParseReference(r + "/charts/glance-operator:0")
	if err != nil {
		return bad(err.Error())
	}
	return ref.Registry, nil
}

// pushIndex pushes an image index archive with its children and blobs under
// its tag, then each SBOM referrer.
func pushIndex(ctx context.Context, client *auth.Client, o Options, name string, b ociimage.IndexResult) (Image, error) {
	src, err := oci.NewFromTar(ctx, b.Path)
	if err != nil {
		return Image{}, err
	}
	repoName := o.Registry + "/" + name
	repo, err := newRepository(client, o, name)
	if err != nil {
		return Image{}, err
	}
	tag := b.Reference[strings.LastIndex(b.Reference, ":")+1:]
	desc, err := oras.Copy(ctx, src, b.Reference, repo, tag, oras.DefaultCopyOptions)
	if err != nil {
		return Image{}, err
	}
	if desc.Digest.String() != b.Digest.String() {
		return Image{}, fmt.Errorf("the registry stored %s:%s as %s, want %s", repoName, tag, desc.Digest, b.Digest)
	}
	for _, p := range b.Platforms {
		sbom, err := src.Resolve(ctx, p.SBOM.String())
		if err != nil {
			return Image{}, fmt.Errorf("the SBOM of linux/%s: %w", p.Arch, err)
		}
		if err := oras.CopyGraph(ctx, src, repo, sbom, oras.DefaultCopyGraphOptions); err != nil {
			return Image{}, fmt.Errorf("the SBOM of linux/%s: %w", p.Arch, err)
		}
	}
	return Image{
		Name:      name,
		Reference: repoName + "@" + b.Digest.String(),
		Tagged:    repoName + ":" + tag,
		Platforms: b.Platforms,
	}, nil
}

// digestOf is the image index digest of the image named name.
func digestOf(images []Image, name string) (v1.Hash, bool) {
	for _, img := range images {
		if img.Name == name {
			_, d, _ := strings.Cut(img.Reference, "@")
			h, err := v1.NewHash(d)
			return h, err == nil
		}
	}
	return v1.Hash{}, false
}

// cleanRevision is the commit the tree is at, refusing uncommitted changes
// unless o.UncommittedTree; empty then, as nothing is claimed of it.
func cleanRevision(ctx context.Context, o Options) (string, error) {
	if o.UncommittedTree {
		return "", nil
	}
	return ociimage.CleanRevision(ctx, o.Images.ModuleRoot)
}
