package s3store_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/c5c3/glance-operator/test/s3store"
)

// call sends an unsigned request and returns the status and body.
func call(t *testing.T, method, target, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// start serves a new store for the test; it returns the store and its URL.
func start(t *testing.T) (*s3store.Server, string) {
	t.Helper()
	s := s3store.New()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func TestPutGetCountsReads(t *testing.T) {
	s, url := start(t)
	if err := s.CreateBucket("images"); err != nil {
		t.Fatal(err)
	}
	const data = "image data"
	if code, body := call(t, http.MethodPut, url+"/images/dir/img-1", data); code != http.StatusOK {
		t.Fatalf("PUT: HTTP %d %s", code, body)
	}
	if n := s.ReadsOf("images", "dir/img-1"); n != 0 {
		t.Errorf("reads after the PUT: %d", n)
	}
	for range 2 {
		if code, body := call(t, http.MethodGet, url+"/images/dir/img-1", ""); code != http.StatusOK || string(body) != data {
			t.Fatalf("GET: HTTP %d %q", code, body)
		}
	}
	if n := s.ReadsOf("images", "dir/img-1"); n != 2 {
		t.Errorf("reads after two GETs: %d", n)
	}
	sum := sha256.Sum256([]byte(data))
	if got, ok := s.ObjectSHA256("images", "dir/img-1"); !ok || got != hex.EncodeToString(sum[:]) {
		t.Errorf("ObjectSHA256 = %q, %v", got, ok)
	}
	if _, ok := s.ObjectSHA256("images", "img-2"); ok {
		t.Error("ObjectSHA256 found an object never put")
	}
	if code, _ := call(t, http.MethodPut, url+"/missing/img", data); code != http.StatusNotFound {
		t.Errorf("PUT into a missing bucket: HTTP %d, want 404", code)
	}
}

func TestMultipartCounted(t *testing.T) {
	s, url := start(t)
	if err := s.CreateBucket("images"); err != nil {
		t.Fatal(err)
	}
	if code, body := call(t, http.MethodPost, url+"/images/big?uploads", ""); code != http.StatusOK || !strings.Contains(string(body), "<UploadId>") {
		t.Fatalf("initiating a multipart upload: HTTP %d %s", code, body)
	}
	if n := s.MultipartUploads(); n != 1 {
		t.Errorf("MultipartUploads = %d, want 1", n)
	}
}
