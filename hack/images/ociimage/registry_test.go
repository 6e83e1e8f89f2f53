package ociimage

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
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
//
// The client speaks the OCI distribution API itself: go-containerregistry's
// remote and crane packages import github.com/docker/cli, which go.sum does
// not hold.
func TestPushPull(t *testing.T) {
	results := builtImages(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	reg := distribution{base: srv.URL, client: srv.Client()}

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
				if err := reg.pushBlob(repo, digest, b); err != nil {
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
			pushed, err := reg.put(srv.URL+"/v2/"+repo+"/manifests/"+tag, string(mt), manifest)
			if err != nil {
				t.Fatal(err)
			}
			if pushed != r.Digest.String() {
				t.Errorf("the registry stored the manifest as %s, want %s", pushed, r.Digest)
			}

			pulled, header, err := reg.get(repo, "manifests/"+tag, string(types.OCIManifestSchema1))
			if err != nil {
				t.Fatal(err)
			}
			if got := sha256Hash(pulled); got != r.Digest || header != r.Digest.String() {
				t.Errorf("pulled %s:%s has digest %s (header %q), want %s", repo, tag, got, header, r.Digest)
			}
			for digest := range blobs {
				b, _, err := reg.get(repo, "blobs/"+digest.String(), "")
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

// distribution is a minimal client of the OCI distribution API: monolithic
// blob uploads, manifest puts and gets.
type distribution struct {
	base   string
	client *http.Client
}

func (d distribution) pushBlob(repo string, digest v1.Hash, b []byte) error {
	resp, err := d.client.Post(d.base+"/v2/"+repo+"/blobs/uploads/", "", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("starting the upload of %s: %s", digest, resp.Status)
	}
	loc, err := url.Parse(d.base)
	if err != nil {
		return err
	}
	if loc, err = loc.Parse(resp.Header.Get("Location")); err != nil {
		return fmt.Errorf("upload location: %w", err)
	}
	q := loc.Query()
	q.Set("digest", digest.String())
	loc.RawQuery = q.Encode()
	_, err = d.put(loc.String(), "application/octet-stream", b)
	return err
}

// put uploads b and returns the digest the registry reports.
func (d distribution) put(u, contentType string, b []byte) (string, error) {
	req, err := http.NewRequest(http.MethodPut, u, bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := d.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		body, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("PUT %s: %s %s", u, resp.Status, body)
	}
	return resp.Header.Get("Docker-Content-Digest"), nil
}

// get fetches /v2/REPO/PATH and returns the body and its reported digest.
func (d distribution) get(repo, path, accept string) ([]byte, string, error) {
	req, err := http.NewRequest(http.MethodGet, d.base+"/v2/"+repo+"/"+path, nil)
	if err != nil {
		return nil, "", err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("GET %s: %s %s", path, resp.Status, b)
	}
	return b, resp.Header.Get("Docker-Content-Digest"), nil
}
