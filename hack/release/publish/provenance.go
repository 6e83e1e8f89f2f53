package publish

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/oci"

	"github.com/c5c3/glance-operator/hack/images/ociimage"
)

// The in-toto statement and SLSA provenance a release attests of each
// artifact it pushes (docs/release.md describes the fields).
const (
	inTotoStatementType = "https://in-toto.io/Statement/v1"
	// SLSAProvenanceType is the predicate type, `cosign verify-attestation
	// --type slsaprovenance1`.
	SLSAProvenanceType = "https://slsa.dev/provenance/v1"
	// BuildType documents the build definition's parameters.
	BuildType = "https://github.com/c5c3/glance-operator/blob/main/docs/release.md#provenance"
	// BuilderID is the builder: make release, hack/release of the commit
	// that builder.version names.
	BuilderID = ociimage.SourceURL + "/tree/main/hack/release"
)

// statement is an in-toto v1 statement with an SLSA provenance v1 predicate.
type statement struct {
	Type          string        `json:"_type"`
	Subject       []resource    `json:"subject"`
	PredicateType string        `json:"predicateType"`
	Predicate     slsaPredicate `json:"predicate"`
}

// resource is an in-toto resource descriptor.
type resource struct {
	Name   string            `json:"name,omitempty"`
	URI    string            `json:"uri,omitempty"`
	Digest map[string]string `json:"digest,omitempty"`
}

type slsaPredicate struct {
	BuildDefinition buildDefinition `json:"buildDefinition"`
	RunDetails      runDetails      `json:"runDetails"`
}

type buildDefinition struct {
	BuildType            string             `json:"buildType"`
	ExternalParameters   externalParameters `json:"externalParameters"`
	InternalParameters   internalParameters `json:"internalParameters"`
	ResolvedDependencies []resource         `json:"resolvedDependencies"`
}

// externalParameters are what make release is asked for.
type externalParameters struct {
	// Source is the repository and commit released.
	Source resource `json:"source"`
	// Registry is REGISTRY.
	Registry string `json:"registry"`
	// Artifact is what the statement is about: an image, the chart, the
	// manifests.
	Artifact string `json:"artifact"`
	// Package is an image's Go package.
	Package string `json:"package,omitempty"`
	// Arches are an image's architectures, linux/ARCH.
	Arches []string `json:"arches,omitempty"`
	// Version is the chart's, the manifests'.
	Version string `json:"version,omitempty"`
	// ReleaseName, Namespace and KubeVersion are the manifests' helm
	// template arguments.
	ReleaseName string `json:"releaseName,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	KubeVersion string `json:"kubeVersion,omitempty"`
	// SourceDateEpoch is SOURCE_DATE_EPOCH, when set.
	SourceDateEpoch string `json:"sourceDateEpoch,omitempty"`
}

// internalParameters are what the builder chose: the Go toolchain and each
// architecture's build settings, from the binary's build info.
type internalParameters struct {
	GoVersion     string                       `json:"goVersion"`
	BuildSettings map[string]map[string]string `json:"buildSettings,omitempty"`
}

type runDetails struct {
	Builder builder `json:"builder"`
}

type builder struct {
	ID      string            `json:"id"`
	Version map[string]string `json:"version"`
}

// provenanceInfo is what every statement of one release shares.
type provenanceInfo struct {
	registry, revision, goVersion, sourceDateEpoch string
}

func (p provenanceInfo) source() resource {
	return resource{URI: "git+" + ociimage.SourceURL + "@" + p.revision, Digest: map[string]string{"gitCommit": p.revision}}
}

func (p provenanceInfo) statement(repoName string, subject digest.Digest, params externalParameters, internal internalParameters, deps []resource) ([]byte, error) {
	params.Source = resource{URI: "git+" + ociimage.SourceURL, Digest: map[string]string{"gitCommit": p.revision}}
	params.Registry = p.registry
	params.SourceDateEpoch = p.sourceDateEpoch
	if internal.GoVersion == "" {
		internal.GoVersion = p.goVersion
	}
	st := statement{
		Type:          inTotoStatementType,
		Subject:       []resource{{Name: repoName, Digest: map[string]string{subject.Algorithm().String(): subject.Encoded()}}},
		PredicateType: SLSAProvenanceType,
		Predicate: slsaPredicate{
			BuildDefinition: buildDefinition{
				BuildType:            BuildType,
				ExternalParameters:   params,
				InternalParameters:   internal,
				ResolvedDependencies: append([]resource{p.source()}, deps...),
			},
			RunDetails: runDetails{Builder: builder{
				ID:      BuilderID,
				Version: map[string]string{"hack/release": p.revision, "go": internal.GoVersion},
			}},
		},
	}
	return json.Marshal(st)
}

// indexProvenance is the provenance of a built image index, from its
// archive: the external parameters, and from each architecture's binary,
// the Go toolchain, the build settings and the modules linked in; and the
// CA bundle the image ships.
func (p provenanceInfo) indexProvenance(ctx context.Context, repoName string, img ociimage.Image, b ociimage.IndexResult) (st []byte, goVersion string, err error) {
	store, err := oci.NewFromTar(ctx, b.Path)
	if err != nil {
		return nil, "", err
	}
	internal := internalParameters{BuildSettings: map[string]map[string]string{}}
	params := externalParameters{Artifact: img.Name, Package: img.Package}
	modules := map[string]resource{}
	var ca resource
	for _, pl := range b.Platforms {
		params.Arches = append(params.Arches, "linux/"+pl.Arch)
		bin, bundle, err := imageFiles(ctx, store, pl.Digest.String(), img.Name)
		if err != nil {
			return nil, "", fmt.Errorf("linux/%s: %w", pl.Arch, err)
		}
		info, err := buildinfo.Read(bytes.NewReader(bin))
		if err != nil {
			return nil, "", fmt.Errorf("linux/%s: the build info of /%s: %w", pl.Arch, img.Name, err)
		}
		if internal.GoVersion != "" && internal.GoVersion != info.GoVersion {
			return nil, "", fmt.Errorf("linux/%s: built with %s, another architecture with %s", pl.Arch, info.GoVersion, internal.GoVersion)
		}
		internal.GoVersion = info.GoVersion
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		internal.BuildSettings["linux/"+pl.Arch] = settings
		for _, dep := range info.Deps {
			m := dep
			if dep.Replace != nil {
				m = dep.Replace
			}
			r := resource{URI: "pkg:golang/" + m.Path + "@" + m.Version}
			if h, ok := strings.CutPrefix(m.Sum, "h1:"); ok {
				if sum, err := base64.StdEncoding.DecodeString(h); err == nil {
					r.Digest = map[string]string{"goModuleH1": hex.EncodeToString(sum)}
				}
			}
			modules[r.URI] = r
		}
		sum := sha256.Sum256(bundle)
		ca = resource{Name: ociimage.CABundle, Digest: map[string]string{"sha256": hex.EncodeToString(sum[:])}}
	}
	deps := []resource{{Name: "go", URI: "pkg:golang/stdlib@" + internal.GoVersion}}
	for _, k := range slices.Sorted(maps.Keys(modules)) {
		deps = append(deps, modules[k])
	}
	deps = append(deps, ca)
	st, err = p.statement(repoName, digest.Digest(b.Digest.String()), params, internal, deps)
	return st, internal.GoVersion, err
}

// imageFiles reads the binary /name and the CA bundle out of the one layer
// of the image manifest ref in store.
func imageFiles(ctx context.Context, store *oci.ReadOnlyStore, ref, name string) (binary, bundle []byte, err error) {
	desc, err := store.Resolve(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	body, err := content.FetchAll(ctx, store, desc)
	if err != nil {
		return nil, nil, err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, nil, err
	}
	if len(m.Layers) != 1 {
		return nil, nil, fmt.Errorf("the image has %d layers, want 1", len(m.Layers))
	}
	rc, err := store.Fetch(ctx, m.Layers[0])
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	zr, err := gzip.NewReader(rc)
	if err != nil {
		return nil, nil, err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		switch h.Name {
		case name:
			if binary, err = io.ReadAll(tr); err != nil {
				return nil, nil, err
			}
		case strings.TrimPrefix(ociimage.CABundle, "/"):
			if bundle, err = io.ReadAll(tr); err != nil {
				return nil, nil, err
			}
		}
	}
	if binary == nil || bundle == nil {
		return nil, nil, fmt.Errorf("the image has no /%s or no %s", name, ociimage.CABundle)
	}
	return binary, bundle, nil
}
