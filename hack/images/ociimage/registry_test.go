package ociimage

import (
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestPushPull pushes each archive to a registry, as a user does before
// installing the chart, pulls it back and checks the digest survives. The
// image is read with go-containerregistry's layout package, as
// `crane push DIR` reads it.
func TestPushPull(t *testing.T) {
	results := builtImages(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	reg := Distribution{Base: srv.URL, Client: srv.Client()}
	ctx := t.Context()

	for i, img := range Images {
		t.Run(img.Name, func(t *testing.T) {
			r := results[i]
			image, err := layoutImage(t, r)
			if err != nil {
				t.Fatal(err)
			}
			// The registry repository: the reference without host and tag.
			_, repo, _ := strings.Cut(img.Repository, "/")
			tag := r.Reference[strings.LastIndex(r.Reference, ":")+1:]

			blobs, err := imageBlobs(image)
			if err != nil {
				t.Fatal(err)
			}
			for digest, b := range blobs {
				if err := reg.PushBlob(ctx, repo, digest, b); err != nil {
					t.Fatal(err)
				}
			}
			manifest, err := image.RawManifest()
			if err != nil {
				t.Fatal(err)
			}
			mt, err := image.MediaType()
			if err != nil {
				t.Fatal(err)
			}
			pushed, err := reg.Put(ctx, srv.URL+"/v2/"+repo+"/manifests/"+tag, string(mt), manifest)
			if err != nil {
				t.Fatal(err)
			}
			if pushed != r.Digest.String() {
				t.Errorf("the registry stored the manifest as %s, want %s", pushed, r.Digest)
			}

			pulled, header, err := reg.Get(ctx, repo, "manifests/"+tag, string(types.OCIManifestSchema1))
			if err != nil {
				t.Fatal(err)
			}
			if got := sha256Hash(pulled); got != r.Digest || header != r.Digest.String() {
				t.Errorf("pulled %s:%s has digest %s (header %q), want %s", repo, tag, got, header, r.Digest)
			}
			for digest := range blobs {
				b, _, err := reg.Get(ctx, repo, "blobs/"+digest.String(), "")
				if err != nil {
					t.Fatal(err)
				}
				if got := sha256Hash(b); got != digest {
					t.Errorf("pulled blob %s has digest %s", digest, got)
				}
			}
		})
	}
}

// imageBlobs returns the config and the compressed layers of img by digest.
func imageBlobs(img v1.Image) (map[v1.Hash][]byte, error) {
	config, err := img.RawConfigFile()
	if err != nil {
		return nil, err
	}
	blobs := map[v1.Hash][]byte{sha256Hash(config): config}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, err
		}
		rc, err := l.Compressed()
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		blobs[d] = b
	}
	return blobs, nil
}
