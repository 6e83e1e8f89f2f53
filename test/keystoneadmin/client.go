// Package keystoneadmin does to a real Keystone, through its v3 API, what a
// cloud's administrator does for a Glance: projects, users and their
// passwords, role assignments, services and their endpoints. It also reads
// what Keystone audits of password authentications (audit.go).
package keystoneadmin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Domain is the domain every project and user of this package is in:
// keystone-manage bootstrap's.
const Domain = "default"

// Client is a Keystone administrator: a user with the admin role on its
// project, which keystone-manage bootstrap makes.
type Client struct {
	http *http.Client
	// url is Keystone's v3 endpoint, without a trailing slash.
	url                     string
	user, password, project string

	mu    sync.Mutex
	token string
}

// Login authenticates as user, scoped to project, both in Domain, at
// Keystone's v3 endpoint url. The client authenticates again when its
// token is refused (an expired token, a restarted Keystone).
func Login(ctx context.Context, hc *http.Client, url, user, password, project string) (*Client, error) {
	c := &Client{http: hc, url: strings.TrimSuffix(url, "/"), user: user, password: password, project: project}
	if err := c.login(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Client) login(ctx context.Context) error {
	t, err := Authenticate(ctx, c.http, c.url, c.user, c.password, c.project)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.token = t.ID
	c.mu.Unlock()
	return nil
}

// Token is a project-scoped token Keystone issued, with its catalog.
type Token struct {
	ID      string
	Roles   []string
	Catalog []CatalogService
}

// CatalogService is a service of a token's catalog.
type CatalogService struct {
	Type      string            `json:"type"`
	Name      string            `json:"name"`
	Endpoints []CatalogEndpoint `json:"endpoints"`
}

// CatalogEndpoint is an endpoint of a catalog's service.
type CatalogEndpoint struct {
	Interface string `json:"interface"`
	Region    string `json:"region"`
	URL       string `json:"url"`
}

// Endpoint returns the URL of the catalog's service of type serviceType
// on iface, or "" when the catalog has none.
func (t Token) Endpoint(serviceType, iface string) string {
	for _, s := range t.Catalog {
		if s.Type != serviceType {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Interface == iface {
				return e.URL
			}
		}
	}
	return ""
}

// Authenticate asks Keystone at url for a token of user with password,
// scoped to project, as any client of the cloud does.
func Authenticate(ctx context.Context, hc *http.Client, url, user, password, project string) (Token, error) {
	domain := map[string]string{"id": Domain}
	body := map[string]any{"auth": map[string]any{
		"identity": map[string]any{
			"methods":  []string{"password"},
			"password": map[string]any{"user": map[string]any{"name": user, "domain": domain, "password": password}},
		},
		"scope": map[string]any{"project": map[string]any{"name": project, "domain": domain}},
	}}
	var out struct {
		Token struct {
			Roles []struct {
				Name string `json:"name"`
			} `json:"roles"`
			Catalog []CatalogService `json:"catalog"`
		} `json:"token"`
	}
	resp, err := call(ctx, hc, http.MethodPost, strings.TrimSuffix(url, "/")+"/auth/tokens", "", body, &out)
	if err != nil {
		return Token{}, fmt.Errorf("authenticating %s in project %s: %w", user, project, err)
	}
	t := Token{ID: resp.Header.Get("X-Subject-Token"), Catalog: out.Token.Catalog}
	if t.ID == "" {
		return Token{}, fmt.Errorf("authenticating %s: no X-Subject-Token in Keystone's answer", user)
	}
	for _, r := range out.Token.Roles {
		t.Roles = append(t.Roles, r.Name)
	}
	return t, nil
}

// StatusError is an answer of Keystone's other than the one asked for.
type StatusError struct {
	Method, Path string
	Code         int
	Body         string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.Path, e.Code, e.Body)
}

// call sends a JSON request to Keystone with token (when set) and decodes
// a 2xx answer into out (when set).
func call(ctx context.Context, hc *http.Client, method, u, token string, in, out any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
		return resp, &StatusError{Method: method, Path: req.URL.Path, Code: resp.StatusCode, Body: strings.TrimSpace(string(b))}
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp, fmt.Errorf("%s %s: %w", method, req.URL.Path, err)
		}
	}
	return resp, nil
}

// do sends a request of the administrator's, authenticating again once
// when Keystone refuses the token.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	for try := 0; ; try++ {
		c.mu.Lock()
		token := c.token
		c.mu.Unlock()
		_, err := call(ctx, c.http, method, c.url+path, token, in, out)
		var se *StatusError
		if try == 0 && errors.As(err, &se) && se.Code == http.StatusUnauthorized {
			if err := c.login(ctx); err != nil {
				return err
			}
			continue
		}
		return err
	}
}

// named is what Keystone's lists hold of each entity.
type named struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// find returns the ID of the entity of collection (projects, users, roles)
// named name in Domain, or "" when there is none.
func (c *Client) find(ctx context.Context, collection, name string) (string, error) {
	q := url.Values{"name": {name}}
	if collection != "roles" {
		q.Set("domain_id", Domain)
	}
	var list map[string]json.RawMessage
	if err := c.do(ctx, http.MethodGet, "/"+collection+"?"+q.Encode(), nil, &list); err != nil {
		return "", err
	}
	var entities []named
	if err := json.Unmarshal(list[collection], &entities); err != nil {
		return "", fmt.Errorf("GET /%s: %w", collection, err)
	}
	for _, e := range entities {
		if e.Name == name {
			return e.ID, nil
		}
	}
	return "", nil
}

// ensure returns the ID of the entity of collection named name, creating
// it with fields when missing.
func (c *Client) ensure(ctx context.Context, collection, name string, fields map[string]any) (string, error) {
	id, err := c.find(ctx, collection, name)
	if err != nil || id != "" {
		return id, err
	}
	return c.create(ctx, collection, name, fields)
}

// create creates the entity of collection named name with fields (and
// Domain but for a role) and returns its ID.
func (c *Client) create(ctx context.Context, collection, name string, fields map[string]any) (string, error) {
	entity := map[string]any{"name": name}
	if collection != "roles" {
		entity["domain_id"] = Domain
	}
	for k, v := range fields {
		entity[k] = v
	}
	var created map[string]named
	singular := strings.TrimSuffix(collection, "s")
	if err := c.do(ctx, http.MethodPost, "/"+collection, map[string]any{singular: entity}, &created); err != nil {
		return "", err
	}
	return created[singular].ID, nil
}

// Project returns the ID of the project name, created when missing.
func (c *Client) Project(ctx context.Context, name string) (string, error) {
	return c.ensure(ctx, "projects", name, nil)
}

// UserID returns the ID of the user name, or "" when there is none.
func (c *Client) UserID(ctx context.Context, name string) (string, error) {
	return c.find(ctx, "users", name)
}

// SetUser creates the user name or sets its password, with project as its
// default project, and makes roles its roles on project: the missing ones
// are granted (a role Keystone lacks is created), the others revoked.
// Keystone revokes a user's tokens when its password is set.
func (c *Client) SetUser(ctx context.Context, name, password, project string, roles ...string) error {
	projectID, err := c.Project(ctx, project)
	if err != nil {
		return err
	}
	fields := map[string]any{"password": password, "default_project_id": projectID}
	userID, err := c.find(ctx, "users", name)
	switch {
	case err != nil:
	case userID == "":
		userID, err = c.create(ctx, "users", name, fields)
	default:
		err = c.do(ctx, http.MethodPatch, "/users/"+userID, map[string]any{"user": fields}, nil)
	}
	if err != nil {
		return err
	}
	want := map[string]string{}
	for _, r := range roles {
		id, err := c.ensure(ctx, "roles", r, nil)
		if err != nil {
			return err
		}
		want[id] = r
	}
	var assigned struct {
		Assignments []struct {
			Role named `json:"role"`
		} `json:"role_assignments"`
	}
	q := url.Values{"user.id": {userID}, "scope.project.id": {projectID}}
	if err := c.do(ctx, http.MethodGet, "/role_assignments?"+q.Encode(), nil, &assigned); err != nil {
		return err
	}
	var has []string
	for _, a := range assigned.Assignments {
		has = append(has, a.Role.ID)
		if _, ok := want[a.Role.ID]; !ok {
			if err := c.do(ctx, http.MethodDelete, "/projects/"+projectID+"/users/"+userID+"/roles/"+a.Role.ID, nil, nil); err != nil {
				return err
			}
		}
	}
	for id := range want {
		if !slices.Contains(has, id) {
			if err := c.do(ctx, http.MethodPut, "/projects/"+projectID+"/users/"+userID+"/roles/"+id, nil, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// SetService makes the catalog hold a service of serviceType named name
// with one endpoint per interface (public, internal, admin) in region,
// each at url: a missing service, region or endpoint is created, an
// endpoint at another URL moved.
func (c *Client) SetService(ctx context.Context, serviceType, name, region, url string) error {
	var services struct {
		Services []named `json:"services"`
	}
	if err := c.do(ctx, http.MethodGet, "/services?type="+serviceType, nil, &services); err != nil {
		return err
	}
	var serviceID string
	if i := slices.IndexFunc(services.Services, func(s named) bool { return s.Name == name }); i >= 0 {
		serviceID = services.Services[i].ID
	} else {
		var created struct {
			Service named `json:"service"`
		}
		if err := c.do(ctx, http.MethodPost, "/services", map[string]any{"service": map[string]any{"type": serviceType, "name": name}}, &created); err != nil {
			return err
		}
		serviceID = created.Service.ID
	}
	err := c.do(ctx, http.MethodGet, "/regions/"+region, nil, nil)
	if se := (*StatusError)(nil); errors.As(err, &se) && se.Code == http.StatusNotFound {
		err = c.do(ctx, http.MethodPost, "/regions", map[string]any{"region": map[string]any{"id": region}}, nil)
	}
	if err != nil {
		return err
	}
	var endpoints struct {
		Endpoints []endpoint `json:"endpoints"`
	}
	if err := c.do(ctx, http.MethodGet, "/endpoints?service_id="+serviceID, nil, &endpoints); err != nil {
		return err
	}
	for _, iface := range []string{"public", "internal", "admin"} {
		body := map[string]any{"endpoint": map[string]any{"service_id": serviceID, "interface": iface, "region_id": region, "url": url}}
		i := slices.IndexFunc(endpoints.Endpoints, func(e endpoint) bool { return e.Interface == iface && e.Region == region })
		switch {
		case i < 0:
			err = c.do(ctx, http.MethodPost, "/endpoints", body, nil)
		case endpoints.Endpoints[i].URL != url:
			err = c.do(ctx, http.MethodPatch, "/endpoints/"+endpoints.Endpoints[i].ID, body, nil)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// endpoint is an endpoint as Keystone's endpoint API lists it.
type endpoint struct {
	ID        string `json:"id"`
	Interface string `json:"interface"`
	Region    string `json:"region_id"`
	URL       string `json:"url"`
}
