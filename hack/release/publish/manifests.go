package publish

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
	"sigs.k8s.io/yaml"

	"github.com/c5c3/glance-operator/hack/images/ociimage"
)

// The static manifests a release publishes beside the chart, for a cluster
// that applies YAML rather than running Helm: one OCI artifact of two
// files, `oras pull REGISTRY/manifests/glance-operator:VERSION`.
const (
	// ManifestsRepository is the artifact's repository under REGISTRY.
	ManifestsRepository = "manifests/glance-operator"
	// ManifestsArtifactType is the artifact's type.
	ManifestsArtifactType = "application/vnd.c5c3.glance-operator.manifests.v1"
	// ManifestsMediaType is each file's layer media type (RFC 9512).
	ManifestsMediaType = "application/yaml"
	// ManifestsFile is everything the chart renders with its default
	// values, as `helm template ManifestsReleaseName CHART --namespace
	// ManifestsNamespace --kube-version ManifestsKubeVersion` prints it.
	ManifestsFile = "glance-operator.yaml"
	// CRDsFile is the CustomResourceDefinitions of ManifestsFile, the same
	// bytes, for clusters whose CRDs are applied apart.
	CRDsFile = "crds.yaml"

	ManifestsReleaseName = "glance-operator"
	ManifestsNamespace   = "glance-system"
	// ManifestsKubeVersion passes the chart's kubeVersion check, as
	// `helm template --kube-version` does: Helm's SDK assumes v1.20.0. The
	// templates do not read the version; it is the one the suites run.
	ManifestsKubeVersion = "1.37.2"
)

// staticManifests are the rendered files.
type staticManifests struct {
	All, CRDs []byte
}

// renderManifests renders a packaged chart with its default values as `helm
// template` does, hooks after the manifests as it prints them.
func renderManifests(archive []byte) (staticManifests, error) {
	c, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		return staticManifests{}, err
	}
	kubeVersion, err := chartutil.ParseKubeVersion(ManifestsKubeVersion)
	if err != nil {
		return staticManifests{}, err
	}
	install := action.NewInstall(&action.Configuration{
		KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
		Releases:     storage.Init(driver.NewMemory()),
		Capabilities: chartutil.DefaultCapabilities,
		Log:          func(string, ...any) {},
	})
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.ReleaseName = ManifestsReleaseName
	install.Namespace = ManifestsNamespace
	install.KubeVersion = kubeVersion
	rel, err := install.Run(c, map[string]any{})
	if err != nil {
		return staticManifests{}, err
	}
	// As cmd/helm's template command writes it.
	var all bytes.Buffer
	fmt.Fprintln(&all, strings.TrimSpace(rel.Manifest))
	for _, h := range rel.Hooks {
		fmt.Fprintf(&all, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	crds, err := selectKind(all.Bytes(), "CustomResourceDefinition")
	if err != nil {
		return staticManifests{}, err
	}
	if len(crds) == 0 {
		return staticManifests{}, fmt.Errorf("the chart renders no CustomResourceDefinition")
	}
	return staticManifests{All: all.Bytes(), CRDs: crds}, nil
}

// selectKind returns the documents of a `helm template` output, each
// "---\n# Source: …\n" and its object, whose kind is kind.
func selectKind(out []byte, kind string) ([]byte, error) {
	var selected bytes.Buffer
	for _, doc := range splitDocuments(string(out)) {
		var obj struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("%s: %w", strings.SplitN(doc, "\n", 3)[1], err)
		}
		if obj.Kind == kind {
			selected.WriteString(doc)
		}
	}
	return selected.Bytes(), nil
}

// splitDocuments splits a `helm template` output at each "---" line that a
// "# Source:" line follows, keeping both.
func splitDocuments(out string) []string {
	var docs []string
	start := 0
	for i := 0; ; {
		j := strings.Index(out[i:], "---\n# Source: ")
		if j < 0 {
			break
		}
		at := i + j
		if at == 0 || out[at-1] == '\n' {
			if at > start {
				docs = append(docs, out[start:at])
			}
			start = at
		}
		i = at + 1
	}
	if start < len(out) {
		docs = append(docs, out[start:])
	}
	return docs
}

// pushManifests pushes the files as one artifact tagged version, byte-stable
// (created is the commit time), and returns its manifest's descriptor.
func pushManifests(ctx context.Context, repo *remote.Repository, m staticManifests, version, revision string, created time.Time) (ocispec.Descriptor, error) {
	var layers []ocispec.Descriptor
	for _, f := range []struct {
		name string
		data []byte
	}{{ManifestsFile, m.All}, {CRDsFile, m.CRDs}} {
		desc := content.NewDescriptorFromBytes(ManifestsMediaType, f.data)
		if err := pushBlob(ctx, repo, desc, f.data); err != nil {
			return ocispec.Descriptor{}, fmt.Errorf("%s: %w", f.name, err)
		}
		desc.Annotations = map[string]string{ocispec.AnnotationTitle: f.name}
		layers = append(layers, desc)
	}
	annotations := map[string]string{
		ocispec.AnnotationCreated: created.UTC().Format(time.RFC3339),
		ocispec.AnnotationVersion: version,
		ocispec.AnnotationSource:  ociimage.SourceURL,
	}
	if revision != "" {
		annotations[ocispec.AnnotationRevision] = revision
	}
	desc, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, ManifestsArtifactType, oras.PackManifestOptions{
		Layers:              layers,
		ManifestAnnotations: annotations,
	})
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if err := repo.Tag(ctx, desc, version); err != nil {
		return ocispec.Descriptor{}, err
	}
	return desc, nil
}
