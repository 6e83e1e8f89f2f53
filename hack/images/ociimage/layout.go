package ociimage

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ociLayoutFile is the image layout's version marker.
const ociLayoutFile = `{"imageLayoutVersion":"1.0.0"}`

// imageLayout is one image as an OCI image layout: its blobs and index.json.
type imageLayout struct {
	blobs  map[v1.Hash][]byte
	index  []byte
	digest v1.Hash // of the image manifest
}

// newLayout assembles the config, the manifest and the index of an image of
// one binary's layer.
func newLayout(img Image, ref, arch string, src source, l layer) (imageLayout, error) {
	return assemble(ref, arch, src.Created, []layer{l}, v1.Config{
		Entrypoint: []string{"/" + img.Name},
		User:       strconv.Itoa(NonrootID) + ":" + strconv.Itoa(NonrootID),
		WorkingDir: "/",
		Labels:     imageLabels(src),
	}, "static "+img.Name+" built from "+img.Package)
}

// imageLabels are the OCI annotations of a product image: its labels, its
// manifest's and its index's annotations.
func imageLabels(src source) map[string]string {
	return map[string]string{
		AnnotationSource:   SourceURL,
		AnnotationVersion:  src.Tag,
		AnnotationRevision: src.Revision,
	}
}

// assemble writes the config, the manifest and the index of an image of
// layers, lowest first. JSON from encoding/json is stable: struct fields in
// declaration order, map keys sorted. The config's labels are the
// manifest's annotations too.
func assemble(ref, arch string, created time.Time, layers []layer, cfg v1.Config, comment string) (imageLayout, error) {
	diffIDs := make([]v1.Hash, 0, len(layers))
	descs := make([]v1.Descriptor, 0, len(layers))
	blobs := map[v1.Hash][]byte{}
	for _, l := range layers {
		diffIDs = append(diffIDs, l.diffID)
		mt := l.mediaType
		if mt == "" {
			mt = types.OCILayer
		}
		descs = append(descs, v1.Descriptor{MediaType: mt, Size: int64(len(l.blob)), Digest: l.digest})
		blobs[l.digest] = l.blob
	}
	config, err := json.Marshal(v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      v1.Time{Time: created},
		History: []v1.History{{
			Created:   v1.Time{Time: created},
			CreatedBy: "make images (hack/images)",
			Comment:   comment,
		}},
		RootFS: v1.RootFS{Type: "layers", DiffIDs: diffIDs},
		Config: cfg,
	})
	if err != nil {
		return imageLayout{}, fmt.Errorf("image config: %w", err)
	}
	configDigest := sha256Hash(config)

	manifest, err := json.Marshal(v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: types.OCIConfigJSON, Size: int64(len(config)), Digest: configDigest},
		Layers:        descs,
		Annotations:   cfg.Labels,
	})
	if err != nil {
		return imageLayout{}, fmt.Errorf("image manifest: %w", err)
	}
	manifestDigest := sha256Hash(manifest)

	index, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: types.OCIManifestSchema1,
			Size:      int64(len(manifest)),
			Digest:    manifestDigest,
			Annotations: map[string]string{
				AnnotationRefName:        ref,
				annotationContainerdName: ref,
			},
			Platform: &v1.Platform{OS: "linux", Architecture: arch},
		}},
	})
	if err != nil {
		return imageLayout{}, fmt.Errorf("layout index: %w", err)
	}
	blobs[configDigest] = config
	blobs[manifestDigest] = manifest
	return imageLayout{blobs: blobs, index: index, digest: manifestDigest}, nil
}

// writeArchive writes the layout as a tar archive at path, replacing it only
// once complete.
func (l imageLayout) writeArchive(path string, mtime time.Time) error {
	entries := []entry{
		{name: "blobs/", mode: 0o755},
		{name: "blobs/sha256/", mode: 0o755},
		{name: "index.json", mode: 0o644, data: l.index},
		{name: "oci-layout", mode: 0o644, data: []byte(ociLayoutFile)},
	}
	for h, b := range l.blobs {
		entries = append(entries, entry{name: "blobs/" + h.Algorithm + "/" + h.Hex, mode: 0o644, data: b})
	}

	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing the archive: %w", err)
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	if err := writeTar(f, entries, mtime); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("writing the archive: %w", err)
	}
	return nil
}
