// Package glanceclient is the tests' client of the Glance v2 API and of
// Keystone's password authentication, as the glance client uses them.
package glanceclient

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Client talks to glance-api at Base, sending Token when it is set.
type Client struct {
	HTTP  *http.Client
	Base  string
	Token string
}

// Response is a whole response of glance-api.
type Response struct {
	Code   int
	Header http.Header
	Body   []byte
}

func (r Response) String() string {
	b := string(r.Body)
	if len(b) > 2000 {
		b = b[:2000] + "…"
	}
	return fmt.Sprintf("HTTP %d: %s", r.Code, strings.TrimSpace(b))
}

// Image is an image as glance-api returns it, in the fields tests read.
type Image struct {
	ID     string   `json:"id"`
	Name   string   `json:"name"`
	Status string   `json:"status"`
	Size   int64    `json:"size"`
	Stores string   `json:"stores"`
	Tags   []string `json:"tags"`
	// Checksum is the data's MD5, OSHashValue its digest in OSHashAlgo.
	Checksum    string `json:"checksum"`
	OSHashAlgo  string `json:"os_hash_algo"`
	OSHashValue string `json:"os_hash_value"`
	// ImportingToStores and FailedImport are the stores an import is
	// still bringing the data to and those it failed for, comma-separated.
	ImportingToStores string `json:"os_glance_importing_to_stores"`
	FailedImport      string `json:"os_glance_failed_import"`
}

// Import is the body of an image import call.
type Import struct {
	Method ImportMethod `json:"method"`
	// Stores are the stores to import to; AllStores means every store.
	Stores    []string `json:"stores,omitempty"`
	AllStores bool     `json:"all_stores,omitempty"`
}

// ImportMethod names the import method: glance-direct, web-download (with
// URI) or copy-image.
type ImportMethod struct {
	Name string `json:"name"`
	URI  string `json:"uri,omitempty"`
}

// send sends a request; contentLength -1 with a body sends it chunked.
func (c *Client) send(method, path string, header http.Header, body io.Reader, contentLength int64) (*http.Response, error) {
	req, err := http.NewRequest(method, c.Base+path, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = contentLength
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if c.Token != "" {
		req.Header.Set("X-Auth-Token", c.Token)
	}
	return c.HTTP.Do(req)
}

// Do sends a request and reads the whole response.
func (c *Client) Do(method, path string, header http.Header, body io.Reader, contentLength int64) (Response, error) {
	resp, err := c.send(method, path, header, body, contentLength)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return Response{Code: resp.StatusCode, Header: resp.Header, Body: data}, err
}

// Get GETs path.
func (c *Client) Get(path string) (Response, error) {
	return c.Do(http.MethodGet, path, nil, nil, 0)
}

// JSON sends in (if not nil) as JSON, or as a JSON patch for PATCH, and
// decodes a 2xx response into out (if not nil).
func (c *Client) JSON(method, path string, in any, out any) (Response, error) {
	var body io.Reader
	var n int64
	h := http.Header{}
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return Response{}, err
		}
		body, n = bytes.NewReader(data), int64(len(data))
		h.Set("Content-Type", "application/json")
		if method == http.MethodPatch {
			h.Set("Content-Type", "application/openstack-images-v2.1-json-patch")
		}
	}
	r, err := c.Do(method, path, h, body, n)
	if err != nil {
		return r, err
	}
	if out != nil && r.Code/100 == 2 {
		if err := json.Unmarshal(r.Body, out); err != nil {
			return r, fmt.Errorf("decoding %s %s: %w (%s)", method, path, err, r)
		}
	}
	return r, nil
}

// chunkedReader hides the length of the data, so that net/http sends it
// with Transfer-Encoding: chunked, in pieces of chunk bytes.
type chunkedReader struct {
	data  []byte
	chunk int
}

func (r *chunkedReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.chunk, len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// Chunked returns a reader of data of unknown length that yields at most
// chunk bytes a Read, so a request with it goes out chunked in pieces of
// that size, as the glance client sends an image.
func Chunked(data []byte, chunk int) io.Reader {
	return &chunkedReader{data: data, chunk: chunk}
}

// uploadHeader names store in X-Image-Meta-Store; "" leaves glance's
// default store.
func uploadHeader(store string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/octet-stream")
	if store != "" {
		h.Set("X-Image-Meta-Store", store)
	}
	return h
}

// Upload PUTs data as the image's file into store, chunked.
func (c *Client) Upload(id, store string, data []byte) (Response, error) {
	return c.Do(http.MethodPut, "/v2/images/"+id+"/file", uploadHeader(store), Chunked(data, 64<<10), -1)
}

// UploadSized PUTs data as the image's file into store with a
// Content-Length, so glance_store knows the size up front.
func (c *Client) UploadSized(id, store string, data []byte) (Response, error) {
	return c.Do(http.MethodPut, "/v2/images/"+id+"/file", uploadHeader(store), bytes.NewReader(data), int64(len(data)))
}

// CreateImage creates a raw, bare image named name, which holds no data
// yet (queued).
func (c *Client) CreateImage(name string) (Image, Response, error) {
	var img Image
	r, err := c.JSON(http.MethodPost, "/v2/images", map[string]string{"name": name, "disk_format": "raw", "container_format": "bare"}, &img)
	if err == nil && r.Code != http.StatusCreated {
		err = fmt.Errorf("create image %s: %s", name, r)
	}
	return img, r, err
}

// Stage PUTs data into the image's staging area, the first half of a
// glance-direct import.
func (c *Client) Stage(id string, data []byte) (Response, error) {
	return c.Do(http.MethodPut, "/v2/images/"+id+"/stage", uploadHeader(""), bytes.NewReader(data), int64(len(data)))
}

// StartImport asks Glance to import the image; it answers 202 once the
// import runs.
func (c *Client) StartImport(id string, in Import) (Response, error) {
	return c.JSON(http.MethodPost, "/v2/images/"+id+"/import", in, nil)
}

// Image GETs the image.
func (c *Client) Image(id string) (Image, Response, error) {
	var img Image
	r, err := c.JSON(http.MethodGet, "/v2/images/"+id, nil, &img)
	if err == nil && r.Code != http.StatusOK {
		err = fmt.Errorf("GET image %s: %s", id, r)
	}
	return img, r, err
}

// Download GETs the image's data and returns its sha256 and size without
// holding it in memory.
func (c *Client) Download(id string) (sha256hex string, size int64, err error) {
	resp, err := c.send(http.MethodGet, "/v2/images/"+id+"/file", nil, nil, 0)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return "", 0, fmt.Errorf("download of %s: HTTP %d: %s", id, resp.StatusCode, b)
	}
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// KeystoneToken authenticates user with password in project (both in the
// Default domain) at url, Keystone's v3 endpoint, and returns the token.
func KeystoneToken(c *http.Client, url, user, password, project string) (string, error) {
	body := fmt.Sprintf(`{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":%q,"domain":{"name":"Default"},"password":%q}}},"scope":{"project":{"name":%q,"domain":{"name":"Default"}}}}}`,
		user, password, project)
	resp, err := c.Post(strings.TrimSuffix(url, "/")+"/auth/tokens", "application/json", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
		return "", fmt.Errorf("authenticating %s: HTTP %d: %s", user, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	token := resp.Header.Get("X-Subject-Token")
	if token == "" {
		return "", fmt.Errorf("authenticating %s: HTTP %d without X-Subject-Token", user, resp.StatusCode)
	}
	return token, nil
}
