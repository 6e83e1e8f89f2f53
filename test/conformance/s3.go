//go:build linux

package conformance

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

// s3Server is a local S3 (gofakes3, in memory) that counts object reads, so
// a test can tell a download glance served from its image cache from one it
// fetched from the store.
type s3Server struct {
	backend *s3mem.Backend
	handler http.Handler

	mu    sync.Mutex
	reads map[string]int // "bucket/key" -> GETs of the object
	// multipart counts initiated multipart uploads.
	multipart int
}

func newS3Server() *s3Server {
	b := s3mem.New()
	return &s3Server{
		backend: b,
		handler: gofakes3.New(b, gofakes3.WithoutVersioning()).Server(),
		reads:   map[string]int{},
	}
}

func (s *s3Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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

func (s *s3Server) multipartUploads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.multipart
}

func (s *s3Server) readsOf(bucket, key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[bucket+"/"+key]
}

// objectSHA256 returns the sha256 of an object and whether it exists.
func (s *s3Server) objectSHA256(bucket, key string) (string, bool) {
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
