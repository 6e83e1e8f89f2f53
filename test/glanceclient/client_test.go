package glanceclient

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestDownloadChecksumAndSize(t *testing.T) {
	data := strings.Repeat("glance", 100_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("X-Auth-Token") != "tok":
			http.Error(w, "no token", http.StatusUnauthorized)
		case r.URL.Path == "/v2/images/img-1/file":
			_, _ = io.WriteString(w, data)
		default:
			http.Error(w, "no such image", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	c := &Client{HTTP: srv.Client(), Base: srv.URL, Token: "tok"}

	sum, n, err := c.Download("img-1")
	want := sha256.Sum256([]byte(data))
	if err != nil || sum != hex.EncodeToString(want[:]) || n != int64(len(data)) {
		t.Errorf("Download = %s, %d, %v; want %x, %d", sum, n, err, want, len(data))
	}
	if _, _, err := c.Download("img-2"); err == nil || !strings.Contains(err.Error(), "HTTP 404: no such image") {
		t.Errorf("Download of a missing image: %v, want the status and body", err)
	}
	anon := &Client{HTTP: srv.Client(), Base: srv.URL}
	if _, _, err := anon.Download("img-1"); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("Download without a token: %v, want HTTP 401", err)
	}
}

func TestUploadChunkedOrSized(t *testing.T) {
	type seen struct {
		store, contentType string
		length             int64
		chunked            bool
		body               string
	}
	var got seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, hasStore := r.Header["X-Image-Meta-Store"]
		got = seen{r.Header.Get("X-Image-Meta-Store"), r.Header.Get("Content-Type"), r.ContentLength,
			len(r.TransferEncoding) == 1 && r.TransferEncoding[0] == "chunked", string(b)}
		if !hasStore {
			got.store = "(none)"
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	c := &Client{HTTP: srv.Client(), Base: srv.URL}
	data := strings.Repeat("x", 200<<10)

	if r, err := c.Upload("img", "s3-east", []byte(data)); err != nil || r.Code != http.StatusNoContent {
		t.Fatalf("Upload: %v %v", r, err)
	}
	if want := (seen{"s3-east", "application/octet-stream", -1, true, data}); got != want {
		t.Errorf("Upload sent store %q, type %q, length %d, chunked %v", got.store, got.contentType, got.length, got.chunked)
	}
	if _, err := c.UploadSized("img", "", []byte(data)); err != nil {
		t.Fatal(err)
	}
	if want := (seen{"(none)", "application/octet-stream", int64(len(data)), false, data}); got != want {
		t.Errorf("UploadSized sent store %q, type %q, length %d, chunked %v", got.store, got.contentType, got.length, got.chunked)
	}
}

func TestChunked(t *testing.T) {
	r := Chunked([]byte("abcdefg"), 3)
	var reads []string
	buf := make([]byte, 10)
	for {
		n, err := r.Read(buf)
		if err == io.EOF {
			break
		}
		reads = append(reads, string(buf[:n]))
	}
	if strings.Join(reads, "|") != "abc|def|g" {
		t.Errorf("reads %q", reads)
	}
}

func TestJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch && r.Header.Get("Content-Type") != "application/openstack-images-v2.1-json-patch" {
			http.Error(w, "wrong patch type "+r.Header.Get("Content-Type"), http.StatusUnsupportedMediaType)
			return
		}
		var in map[string]any
		_ = json.NewDecoder(r.Body).Decode(&in)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(Image{ID: "img-1", Name: in["name"].(string), Status: "queued"})
	}))
	defer srv.Close()
	c := &Client{HTTP: srv.Client(), Base: srv.URL}

	var img Image
	r, err := c.JSON(http.MethodPost, "/v2/images", map[string]any{"name": "cirros"}, &img)
	if err != nil || r.Code != http.StatusCreated || img.ID != "img-1" || img.Name != "cirros" {
		t.Errorf("JSON: %v %v %+v", r, err, img)
	}
	if r, err := c.JSON(http.MethodPatch, "/v2/images/img-1", map[string]any{"name": "x"}, nil); err != nil || r.Code != http.StatusCreated {
		t.Errorf("PATCH: %v %v", r, err)
	}
}

func TestKeystoneToken(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Auth struct {
				Identity struct {
					Password struct {
						User struct{ Name, Password string }
					}
				}
				Scope struct{ Project struct{ Name string } }
			}
		}
		if r.URL.Path != "/v3/auth/tokens" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		u := req.Auth.Identity.Password.User
		if u.Name != "demo" || u.Password != `pa"ss` || req.Auth.Scope.Project.Name != "demo" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"code":401,"message":"The request you have made requires authentication."}}`)
			return
		}
		w.Header().Set("X-Subject-Token", "gAAAAtoken")
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()

	tok, err := KeystoneToken(srv.Client(), srv.URL+"/v3/", "demo", `pa"ss`, "demo")
	if err != nil || tok != "gAAAAtoken" {
		t.Errorf("KeystoneToken = %q, %v; want the X-Subject-Token", tok, err)
	}
	_, err = KeystoneToken(srv.Client(), srv.URL+"/v3", "demo", "wrong", "demo")
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "requires authentication") {
		t.Errorf("a wrong password: %v, want HTTP 401 with Keystone's message", err)
	}
}

func TestStageImportAndImage(t *testing.T) {
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		calls = append(calls, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type")+" "+string(b))
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/v2/images/img/stage":
			w.WriteHeader(http.StatusNoContent)
		case r.Method == http.MethodPost && r.URL.Path == "/v2/images/img/import":
			w.WriteHeader(http.StatusAccepted)
		case r.Method == http.MethodPost && r.URL.Path == "/v2/images":
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"img","name":"n","status":"queued"}`)
		case r.Method == http.MethodGet && r.URL.Path == "/v2/images/img":
			_, _ = io.WriteString(w, `{"id":"img","status":"active","stores":"s3,s3-second","checksum":"c","os_hash_algo":"sha512","os_hash_value":"h","os_glance_failed_import":"","os_glance_importing_to_stores":"s3-third"}`)
		default:
			http.Error(w, "no such image", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	c := &Client{HTTP: srv.Client(), Base: srv.URL}

	if img, _, err := c.CreateImage("n"); err != nil || img.ID != "img" || img.Status != "queued" {
		t.Errorf("CreateImage: %+v %v", img, err)
	}
	if r, err := c.Stage("img", []byte("data")); err != nil || r.Code != http.StatusNoContent {
		t.Errorf("Stage: %v %v", r, err)
	}
	if r, err := c.StartImport("img", Import{Method: ImportMethod{Name: "copy-image"}, Stores: []string{"s3-second"}}); err != nil || r.Code != http.StatusAccepted {
		t.Errorf("StartImport: %v %v", r, err)
	}
	want := []string{
		`POST /v2/images application/json {"container_format":"bare","disk_format":"raw","name":"n"}`,
		"PUT /v2/images/img/stage application/octet-stream data",
		`POST /v2/images/img/import application/json {"method":{"name":"copy-image"},"stores":["s3-second"]}`,
	}
	if strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	img, _, err := c.Image("img")
	if err != nil || img.Status != "active" || img.Stores != "s3,s3-second" || img.Checksum != "c" || img.OSHashAlgo != "sha512" ||
		img.OSHashValue != "h" || img.ImportingToStores != "s3-third" || img.FailedImport != "" {
		t.Errorf("Image = %+v, %v", img, err)
	}
	if _, r, err := c.Image("gone"); err == nil || r.Code != http.StatusNotFound {
		t.Errorf("Image of a missing image: %v %v, want an error with the 404", r, err)
	}
}
