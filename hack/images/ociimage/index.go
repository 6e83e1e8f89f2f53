package ociimage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The media types of the SBOM referrers.
const (
	// SBOMMediaType is the artifact type of an SBOM referrer and the media
	// type of its one layer, an SPDX 2.3 document in JSON.
	SBOMMediaType = "application/spdx+json"
	// emptyMediaType is the OCI 1.1 empty descriptor's, the config of an
	// artifact that has none.
	emptyMediaType = "application/vnd.oci.empty.v1+json"
	// annotationTitle names a layer's file, as oras pulls it.
	annotationTitle = "org.opencontainers.image.title"
)

// emptyJSON is the empty descriptor's content.
var emptyJSON = []byte("{}")

// Platform is one architecture's image of an image index, and the SBOM
// that refers to it.
type Platform struct {
	Arch string
	// Digest is the image manifest's, the same `make images` gives for Arch.
	Digest v1.Hash
	// SBOM is the digest of the SBOM artifact's manifest, whose subject is
	// Digest.
	SBOM v1.Hash
}

// IndexResult describes one written multi-architecture archive.
type IndexResult struct {
	Result
	// Platforms are the index's images, in the order of the arches asked for.
	Platforms []Platform
	// Created is the images' created time: the commit's, or
	// SOURCE_DATE_EPOCH.
	Created time.Time
}

// BuildIndex builds every image of Images for each of arches into one OCI
// image index, each architecture's image with an SPDX SBOM of its binary
// attached as a referrer (an artifact manifest whose subject is the image),
// and writes NAME.oci.tar to o.OutDir. The layout's index.json tags the image
// index with its reference and lists the SBOMs after it. o.Arch is ignored.
func BuildIndex(ctx context.Context, o Options, arches []string) ([]IndexResult, error) {
	if len(arches) == 0 {
		return nil, errors.New("no architectures")
	}
	for i, a := range arches {
		if slices.Contains(arches[:i], a) {
			return nil, fmt.Errorf("architecture %q given twice", a)
		}
	}
	b, err := newBuilder(ctx, &o)
	if err != nil {
		return nil, err
	}
	defer b.close()
	// The SBOMs name the CA bundle's package; read it before the slow builds.
	if b.caPackage, err = readCAPackage(o.DpkgStatus); err != nil {
		return nil, err
	}

	results := make([]IndexResult, 0, len(Images))
	for _, img := range Images {
		r, err := b.index(ctx, img, arches)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", img.Name, err)
		}
		results = append(results, r)
	}
	return results, nil
}

func (b *builder) index(ctx context.Context, img Image, arches []string) (IndexResult, error) {
	ref := b.reference(img)
	blobs := map[v1.Hash][]byte{sha256Hash(emptyJSON): emptyJSON}
	var children, sboms []v1.Descriptor
	r := IndexResult{Result: Result{Reference: ref, Path: filepath.Join(b.o.OutDir, img.Name+".oci.tar")}, Created: b.src.Created}
	for _, arch := range arches {
		l, binary, err := b.image(ctx, img, arch)
		if err != nil {
			return IndexResult{}, fmt.Errorf("linux/%s: %w", arch, err)
		}
		for h, blob := range l.blobs {
			blobs[h] = blob
		}
		image := v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Size:      int64(len(l.blobs[l.digest])),
			Digest:    l.digest,
			Platform:  &v1.Platform{OS: "linux", Architecture: arch},
		}
		children = append(children, image)

		doc, err := newSBOM(img, arch, binary, b.src, b.caPackage, b.ca)
		if err != nil {
			return IndexResult{}, fmt.Errorf("linux/%s: %w", arch, err)
		}
		subject := image
		subject.Platform = nil
		sbom, manifest, err := sbomManifest(img.Name, arch, doc, subject, b.src)
		if err != nil {
			return IndexResult{}, fmt.Errorf("linux/%s: %w", arch, err)
		}
		blobs[sha256Hash(doc)] = doc
		blobs[sbom.Digest] = manifest
		sboms = append(sboms, sbom)
		r.Platforms = append(r.Platforms, Platform{Arch: arch, Digest: l.digest, SBOM: sbom.Digest})
	}

	index, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests:     children,
		Annotations:   imageLabels(b.src),
	})
	if err != nil {
		return IndexResult{}, fmt.Errorf("image index: %w", err)
	}
	r.Digest = sha256Hash(index)
	blobs[r.Digest] = index

	layoutIndex, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: append([]v1.Descriptor{{
			MediaType: types.OCIImageIndex,
			Size:      int64(len(index)),
			Digest:    r.Digest,
			Annotations: map[string]string{
				AnnotationRefName:        ref,
				annotationContainerdName: ref,
			},
		}}, sboms...),
	})
	if err != nil {
		return IndexResult{}, fmt.Errorf("layout index: %w", err)
	}
	l := imageLayout{blobs: blobs, index: layoutIndex, digest: r.Digest}
	if err := l.writeArchive(r.Path, b.src.Created); err != nil {
		return IndexResult{}, err
	}
	return r, nil
}

// sbomManifest is the artifact manifest of an SBOM document that refers to
// subject, and its descriptor as the layout's index.json lists it.
func sbomManifest(name, arch string, doc []byte, subject v1.Descriptor, src source) (v1.Descriptor, []byte, error) {
	annotations := map[string]string{
		"org.opencontainers.image.created": src.Created.Format("2006-01-02T15:04:05Z"),
		AnnotationRevision:                 src.Revision,
	}
	manifest, err := json.Marshal(v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  SBOMMediaType,
		Config:        v1.Descriptor{MediaType: emptyMediaType, Size: int64(len(emptyJSON)), Digest: sha256Hash(emptyJSON)},
		Layers: []v1.Descriptor{{
			MediaType:   SBOMMediaType,
			Size:        int64(len(doc)),
			Digest:      sha256Hash(doc),
			Annotations: map[string]string{annotationTitle: name + "-linux-" + arch + ".spdx.json"},
		}},
		Subject:     &subject,
		Annotations: annotations,
	})
	if err != nil {
		return v1.Descriptor{}, nil, fmt.Errorf("SBOM manifest: %w", err)
	}
	return v1.Descriptor{
		MediaType:    types.OCIManifestSchema1,
		ArtifactType: SBOMMediaType,
		Size:         int64(len(manifest)),
		Digest:       sha256Hash(manifest),
		Annotations:  annotations,
	}, manifest, nil
}
