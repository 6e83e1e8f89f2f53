//go:build linux

package conformance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// httpClient is a client inside the pod's network: the pod's /etc/hosts
// names resolve as they do for glance, and 127.0.0.1 is the pod's own
// loopback.
func (p *pod) httpClient() *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if ip, ok := p.hostIPs[host]; ok {
				host = ip
			}
			return p.ns.dial(ctx, net.JoinHostPort(host, port))
		},
		DisableCompression: true,
		MaxIdleConns:       4,
		IdleConnTimeout:    5 * time.Second,
	}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

// glanceClient talks to glance-api in a pod.
type glanceClient struct {
	http  *http.Client
	base  string
	token string
}

type response struct {
	code   int
	header http.Header
	body   []byte
}

func (r response) String() string {
	b := string(r.body)
	if len(b) > 2000 {
		b = b[:2000] + "…"
	}
	return fmt.Sprintf("HTTP %d: %s", r.code, strings.TrimSpace(b))
}

func (c *glanceClient) do(method, path string, header http.Header, body io.Reader, contentLength int64) (response, error) {
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		return response{}, err
	}
	if body != nil {
		req.ContentLength = contentLength
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header.Set("X-Auth-Token", c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return response{code: resp.StatusCode, header: resp.Header, body: data}, err
}

func (c *glanceClient) get(path string) (response, error) {
	return c.do(http.MethodGet, path, nil, nil, 0)
}

func (c *glanceClient) json(method, path string, in any, out any) (response, error) {
	var body io.Reader
	var n int64
	h := http.Header{}
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return response{}, err
		}
		body, n = bytes.NewReader(data), int64(len(data))
		h.Set("Content-Type", "application/json")
		if method == http.MethodPatch {
			h.Set("Content-Type", "application/openstack-images-v2.1-json-patch")
		}
	}
	r, err := c.do(method, path, h, body, n)
	if err != nil {
		return r, err
	}
	if out != nil && r.code/100 == 2 {
		if err := json.Unmarshal(r.body, out); err != nil {
			return r, fmt.Errorf("decoding %s %s: %w (%s)", method, path, err, r)
		}
	}
	return r, nil
}

type image struct {
	ID     string   `json:"id"`
	Name   string   `json:"name"`
	Status string   `json:"status"`
	Size   int64    `json:"size"`
	Stores string   `json:"stores"`
	Tags   []string `json:"tags"`
}

// chunkedReader hides the length of the data, so the upload goes out with
// Transfer-Encoding: chunked in pieces of chunk bytes, as the glance client
// sends an image.
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

// upload PUTs data as the image's file into store, chunked.
func (c *glanceClient) upload(id, store string, data []byte) (response, error) {
	h := http.Header{}
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Image-Meta-Store", store)
	// ContentLength -1: unknown, so net/http sends chunked.
	return c.do(http.MethodPut, "/v2/images/"+id+"/file", h, &chunkedReader{data: data, chunk: 64 << 10}, -1)
}

// uploadSized PUTs data as the image's file into store with a
// Content-Length, so glance_store knows the size up front.
func (c *glanceClient) uploadSized(id, store string, data []byte) (response, error) {
	h := http.Header{}
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Image-Meta-Store", store)
	return c.do(http.MethodPut, "/v2/images/"+id+"/file", h, bytes.NewReader(data), int64(len(data)))
}

// download GETs the image's data and returns its sha256.
func (c *glanceClient) download(id string) (string, int64, error) {
	req, err := http.NewRequest(http.MethodGet, c.base+"/v2/images/"+id+"/file", nil)
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("X-Auth-Token", c.token)
	resp, err := c.http.Do(req)
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

// keystoneToken authenticates user against the stand-in Keystone through
// the pod's network.
func keystoneTokenVia(client *http.Client, url, user, password, project string) (string, error) {
	body := fmt.Sprintf(`{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":%q,"domain":{"name":"Default"},"password":%q}}},"scope":{"project":{"name":%q,"domain":{"name":"Default"}}}}}`,
		user, password, project)
	resp, err := client.Post(strings.TrimSuffix(url, "/")+"/auth/tokens", "application/json", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("authenticating %s: HTTP %d", user, resp.StatusCode)
	}
	return resp.Header.Get("X-Subject-Token"), nil
}
