// Package s3store is a local S3 (gofakes3, in memory) that counts object
// reads, so a test can tell a download glance served from its image cache
// from one it fetched from the store, and multipart initiations, so it can
// tell a large upload went out in parts.
package s3store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Server is the S3 store.
type Server struct {
	backend *s3mem.Backend
	handler http.Handler

	mu    sync.Mutex
	reads map[string]int // "bucket/key" -> GETs of the object
	// multipart counts initiated multipart uploads.
	multipart int
}

// New returns an empty store that takes path-style requests, signed or not.
func New() *Server {
	b := s3mem.New()
	return &Server{
		backend: b,
		handler: gofakes3.New(b, gofakes3.WithoutVersioning()).Server(),
		reads:   map[string]int{},
	}
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.Trim(r.URL.Path, "/")
	if bucket, key, ok := strings.Cut(path, "/"); ok && key != "" {
		s.mu.Lock()
		switch {
		case r.Method == http.MethodGet:
			s.reads[bucket+"/"+key]++
		case r.Method == http.MethodPost && r.URL.Query().Has("uploads"):
			s.multipart++
		}
		s.mu.Unlock()
	}
	s.handler.ServeHTTP(w, r)
}

// CreateBucket creates an empty bucket; it fails if the bucket exists.
func (s *Server) CreateBucket(name string) error {
	return s.backend.CreateBucket(name)
}

// MultipartUploads counts the multipart uploads initiated so far.
func (s *Server) MultipartUploads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.multipart
}

// ReadsOf counts the GETs of an object so far.
func (s *Server) ReadsOf(bucket, key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[bucket+"/"+key]
}

// ObjectSHA256 returns the sha256 of an object and whether it exists.
func (s *Server) ObjectSHA256(bucket, key string) (string, bool) {
	o, ok := s.object(bucket, key)
	return o.SHA256, ok
}

func (s *Server) object(bucket, key string) (Object, bool) {
	obj, err := s.backend.GetObject(bucket, key, nil)
	if err != nil {
		return Object{}, false
	}
	defer obj.Contents.Close()
	h := sha256.New()
	n, err := io.Copy(h, obj.Contents)
	if err != nil {
		return Object{}, false
	}
	return Object{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n, Reads: s.ReadsOf(bucket, key)}, true
}

// Object is what GET /objects/{bucket}/{key} on the admin API reports.
type Object struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	Reads  int    `json:"reads"`
}

// Multipart is what GET /multipart on the admin API reports.
type Multipart struct {
	Uploads int `json:"uploads"`
}

// AdminHandler serves what a test asks of the store when it runs in a pod:
// GET /objects/{bucket}/{key...} (an Object, or 404), GET /multipart (a
// Multipart) and PUT /buckets/{name}, which creates a bucket (201, or 200
// if it exists). Reads through it are not counted.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /objects/{bucket}/{key...}", func(w http.ResponseWriter, r *http.Request) {
		bucket, key := r.PathValue("bucket"), r.PathValue("key")
		o, ok := s.object(bucket, key)
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no object " + key + " in bucket " + bucket})
			return
		}
		writeJSON(w, http.StatusOK, o)
	})
	mux.HandleFunc("GET /multipart", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, Multipart{Uploads: s.MultipartUploads()})
	})
	mux.HandleFunc("PUT /buckets/{name}", func(w http.ResponseWriter, r *http.Request) {
		err := s.CreateBucket(r.PathValue("name"))
		switch {
		case err == nil:
			w.WriteHeader(http.StatusCreated)
		case gofakes3.IsAlreadyExists(err):
			w.WriteHeader(http.StatusOK)
		default:
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		}
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
