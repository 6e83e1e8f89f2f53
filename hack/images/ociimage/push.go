package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Distribution is a minimal client of the OCI distribution API: monolithic
// blob uploads, manifest puts and gets. go-containerregistry's remote and
// crane packages import github.com/docker/cli, which go.sum does not hold.
type Distribution struct {
	// Base is the registry's URL, such as http://127.0.0.1:5000.
	Base   string
	Client *http.Client
}

// PushBlob uploads b as the blob digest of repo, unless the registry has it.
func (d Distribution) PushBlob(ctx context.Context, repo string, digest v1.Hash, b []byte) error {
	head, err := http.NewRequestWithContext(ctx, http.MethodHead, d.Base+"/v2/"+repo+"/blobs/"+digest.String(), nil)
	if err != nil {
		return err
	}
	if resp, err := d.Client.Do(head); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
	}
	start, err := http.NewRequestWithContext(ctx, http.MethodPost, d.Base+"/v2/"+repo+"/blobs/uploads/", nil)
	if err != nil {
		return err
	}
	resp, err := d.Client.Do(start)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("starting the upload of %s: %s", digest, resp.Status)
	}
	loc, err := url.Parse(d.Base)
	if err != nil {
		return err
	}
	if loc, err = loc.Parse(resp.Header.Get("Location")); err != nil {
		return fmt.Errorf("upload location: %w", err)
	}
	q := loc.Query()
	q.Set("digest", digest.String())
	loc.RawQuery = q.Encode()
	_, err = d.Put(ctx, loc.String(), "application/octet-stream", b)
	return err
}

// Put uploads b and returns the digest the registry reports.
func (d Distribution) Put(ctx context.Context, u, contentType string, b []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := d.Client.Do(req)
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

// Get fetches /v2/REPO/PATH and returns the body and its reported digest.
func (d Distribution) Get(ctx context.Context, repo, path, accept string) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.Base+"/v2/"+repo+"/"+path, nil)
	if err != nil {
		return nil, "", err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := d.Client.Do(req)
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

// PushArchive pushes the image of an OCI layout archive (one image, as Build
// and WriteBinaryArchive write them) to repo:tag and returns the manifest's
// digest, which the registry confirmed.
func (d Distribution) PushArchive(ctx context.Context, archive, repo, tag string) (v1.Hash, error) {
	files, err := readLayoutArchive(archive)
	if err != nil {
		return v1.Hash{}, err
	}
	var index v1.IndexManifest
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		return v1.Hash{}, fmt.Errorf("%s: index.json: %w", archive, err)
	}
	if len(index.Manifests) != 1 {
		return v1.Hash{}, fmt.Errorf("%s: index.json lists %d manifests, want 1", archive, len(index.Manifests))
	}
	desc := index.Manifests[0]
	blob := func(h v1.Hash) ([]byte, error) {
		b, ok := files["blobs/"+h.Algorithm+"/"+h.Hex]
		if !ok {
			return nil, fmt.Errorf("%s: blob %s missing", archive, h)
		}
		return b, nil
	}
	manifestBytes, err := blob(desc.Digest)
	if err != nil {
		return v1.Hash{}, err
	}
	var manifest v1.Manifest
	if err := json.Unmarshal(manifestBytes, &manifest); err != nil {
		return v1.Hash{}, fmt.Errorf("%s: manifest: %w", archive, err)
	}
	for _, l := range append([]v1.Descriptor{manifest.Config}, manifest.Layers...) {
		b, err := blob(l.Digest)
		if err != nil {
			return v1.Hash{}, err
		}
		if err := d.PushBlob(ctx, repo, l.Digest, b); err != nil {
			return v1.Hash{}, err
		}
	}
	pushed, err := d.Put(ctx, d.Base+"/v2/"+repo+"/manifests/"+tag, string(desc.MediaType), manifestBytes)
	if err != nil {
		return v1.Hash{}, err
	}
	if pushed != desc.Digest.String() {
		return v1.Hash{}, fmt.Errorf("the registry stored %s:%s as %s, want %s", repo, tag, pushed, desc.Digest)
	}
	return desc.Digest, nil
}

// readLayoutArchive reads every regular file of an archive by name.
func readLayoutArchive(path string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, h.Name, err)
		}
		files[strings.TrimPrefix(h.Name, "./")] = b
	}
}
