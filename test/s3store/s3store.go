// Package s3store is a local S3 (gofakes3, in memory) for suites that run
// Glance without a cluster (test/conformance): it counts object reads, so
// a test can tell a download glance served from its image cache from one
// it fetched from the store, and multipart initiations, so it can tell a
// large upload went out in parts.
package s3store

import (
	"crypto/sha256"
	"encoding/hex"
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
	obj, err := s.backend.GetObject(bucket, key, nil)
	if err != nil {
		return "", false
	}
	defer obj.Contents.Close()
	h := sha256.New()
	if _, err := io.Copy(h, obj.Contents); err != nil {
		return "", false
	}
	return hex.EncodeToString(h.Sum(nil)), true
}
