package operatortest

import (
	"net/http"
	"sync"
)

// APIReads records the reads the operator sends the API server: every GET
// but a watch's, by method and path. A watch is one long request that the
// caches hold open, not a read of a pass.
type APIReads struct {
	mu    sync.Mutex
	reads []string
}

// Mark is where the reads recorded so far end.
func (r *APIReads) Mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reads)
}

// Since returns the reads recorded after mark.
func (r *APIReads) Since(mark int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reads[mark:]...)
}

func (r *APIReads) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet && req.URL.Query().Get("watch") != "true" {
			r.mu.Lock()
			r.reads = append(r.reads, req.URL.Path)
			r.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
