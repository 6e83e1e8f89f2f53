package targetcluster

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// ServiceProxy GETs a path of a Service through its cluster's API server
// (/api/v1/namespaces/{ns}/services/{name}:{port}/proxy/{path}): how the
// operator reaches a Service on a target cluster, whose pod network it is
// not on. It answers the Service's status code.
type ServiceProxy struct {
	// Host is the API server's URL, as in its rest.Config.
	Host string
	// Client carries the API server's credentials and CA.
	Client *http.Client
}

// Get implements the probe of one Service path.
func (s ServiceProxy) Get(ctx context.Context, namespace, service string, port int, path string) (int, error) {
	u := s.URL(namespace, service, port, path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// URL is the service-proxy URL of the Service path.
func (s ServiceProxy) URL(namespace, service string, port int, path string) string {
	return fmt.Sprintf("%s/api/v1/namespaces/%s/services/%s:%d/proxy/%s", strings.TrimSuffix(s.Host, "/"),
		url.PathEscape(namespace), url.PathEscape(service), port, strings.TrimPrefix(path, "/"))
}
