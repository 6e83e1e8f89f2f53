// Package keystone is a stand-in Keystone v3 for keystonemiddleware:
// version discovery, password authentication with a project scope (POST
// /v3/auth/tokens) and token validation (GET /v3/auth/tokens, which, like
// Keystone, requires a valid token of the caller in X-Auth-Token). It knows
// its users' passwords and accepts nothing else; changing a password revokes
// the user's tokens, as Keystone does. The conformance suite runs it in its
// process; the real node runs Debian's Keystone (test/realnode).
package keystone

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Server is the stand-in Keystone.
type Server struct {
	// url is the versioned endpoint as clients see it (the catalog's URL).
	url string

	mu       sync.Mutex
	users    map[string]*user // by name
	tokens   map[string]*token
	attempts []Attempt
}

type user struct {
	id, name, password string
	project            string
	roles              []string
}

type token struct {
	user    *user
	issued  time.Time
	expires time.Time
}

// Attempt is one password authentication: who, with which password (tests
// compare it, it is never logged), and whether it was accepted.
type Attempt struct {
	User     string    `json:"user"`
	Password string    `json:"password"`
	OK       bool      `json:"ok"`
	At       time.Time `json:"at"`
}

const (
	domainID   = "default"
	domainName = "Default"
)

// New returns a Keystone without users whose catalog names url, its
// versioned endpoint as clients reach it.
func New(url string) *Server {
	return &Server{url: strings.TrimSuffix(url, "/"), users: map[string]*user{}, tokens: map[string]*token{}}
}

// URL is the versioned endpoint New was given, without a trailing slash.
func (k *Server) URL() string { return k.url }

// SetUser creates or updates a user; a changed password revokes its tokens.
func (k *Server) SetUser(name, password, project string, roles ...string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	u, ok := k.users[name]
	if !ok {
		u = &user{id: randomHex(16), name: name}
		k.users[name] = u
	}
	if u.password != password {
		for id, t := range k.tokens {
			if t.user == u {
				delete(k.tokens, id)
			}
		}
	}
	u.password, u.project, u.roles = password, project, roles
}

// AttemptsSince returns the password authentications of user since t.
func (k *Server) AttemptsSince(user string, t time.Time) []Attempt {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []Attempt
	for _, a := range k.attempts {
		if a.User == user && !a.At.Before(t) {
			out = append(out, a)
		}
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (k *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case path == "" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusMultipleChoices, map[string]any{"versions": map[string]any{"values": []any{k.version()}}})
	case path == "/v3" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{"version": k.version()})
	case path == "/v3/auth/tokens" && r.Method == http.MethodPost:
		k.authenticate(w, r)
	case path == "/v3/auth/tokens" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		k.validate(w, r)
	default:
		writeJSON(w, http.StatusNotFound, keystoneError(http.StatusNotFound, "Not Found", "no such resource in the stand-in Keystone: "+r.Method+" "+r.URL.Path))
	}
}

func (k *Server) version() map[string]any {
	return map[string]any{
		"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
		"links":       []any{map[string]any{"rel": "self", "href": k.url + "/"}},
		"media-types": []any{map[string]any{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}},
	}
}

func keystoneError(code int, title, msg string) map[string]any {
	return map[string]any{"error": map[string]any{"code": code, "title": title, "message": msg}}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

type authRequest struct {
	Auth struct {
		Identity struct {
			Methods  []string `json:"methods"`
			Password struct {
				User struct {
					ID       string `json:"id"`
					Name     string `json:"name"`
					Password string `json:"password"`
					Domain   struct {
						ID   string `json:"id"`
						Name string `json:"name"`
					} `json:"domain"`
				} `json:"user"`
			} `json:"password"`
		} `json:"identity"`
		Scope struct {
			Project struct {
				ID     string `json:"id"`
				Name   string `json:"name"`
				Domain struct {
					ID   string `json:"id"`
					Name string `json:"name"`
				} `json:"domain"`
			} `json:"project"`
		} `json:"scope"`
	} `json:"auth"`
}

func inDefaultDomain(id, name string) bool {
	return id == domainID || name == domainName
}

func (k *Server) authenticate(w http.ResponseWriter, r *http.Request) {
	var req authRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, keystoneError(400, "Bad Request", err.Error()))
		return
	}
	id := req.Auth.Identity
	pu := id.Password.User
	k.mu.Lock()
	defer k.mu.Unlock()
	u := k.users[pu.Name]
	ok := len(id.Methods) == 1 && id.Methods[0] == "password" && u != nil &&
		inDefaultDomain(pu.Domain.ID, pu.Domain.Name) && pu.Password == u.password
	k.attempts = append(k.attempts, Attempt{User: pu.Name, Password: pu.Password, OK: ok, At: time.Now()})
	if !ok {
		writeJSON(w, http.StatusUnauthorized, keystoneError(401, "Unauthorized", "The request you have made requires authentication."))
		return
	}
	p := req.Auth.Scope.Project
	if p.Name != u.project || !inDefaultDomain(p.Domain.ID, p.Domain.Name) {
		writeJSON(w, http.StatusUnauthorized, keystoneError(401, "Unauthorized", "User has no access to project"))
		return
	}
	now := time.Now().UTC()
	t := &token{user: u, issued: now, expires: now.Add(time.Hour)}
	tokenID := "gAAAA" + randomHex(32)
	k.tokens[tokenID] = t
	w.Header().Set("X-Subject-Token", tokenID)
	writeJSON(w, http.StatusCreated, k.tokenBody(t))
}

func (k *Server) validate(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	defer k.mu.Unlock()
	caller, ok := k.tokens[r.Header.Get("X-Auth-Token")]
	if !ok || time.Now().After(caller.expires) {
		writeJSON(w, http.StatusUnauthorized, keystoneError(401, "Unauthorized", "The request you have made requires authentication."))
		return
	}
	t, ok := k.tokens[r.Header.Get("X-Subject-Token")]
	if !ok || time.Now().After(t.expires) {
		writeJSON(w, http.StatusNotFound, keystoneError(404, "Not Found", "Could not find token."))
		return
	}
	writeJSON(w, http.StatusOK, k.tokenBody(t))
}

func projectID(name string) string { return "p-" + name }

func (k *Server) tokenBody(t *token) map[string]any {
	const layout = "2006-01-02T15:04:05.000000Z"
	domain := map[string]any{"id": domainID, "name": domainName}
	var roles []any
	for _, r := range t.user.roles {
		roles = append(roles, map[string]any{"id": "r-" + r, "name": r})
	}
	var endpoints []any
	for _, iface := range []string{"public", "internal", "admin"} {
		endpoints = append(endpoints, map[string]any{
			"id": "e-" + iface, "interface": iface, "region": "RegionOne", "region_id": "RegionOne", "url": k.url,
		})
	}
	return map[string]any{"token": map[string]any{
		"methods":    []string{"password"},
		"user":       map[string]any{"id": t.user.id, "name": t.user.name, "domain": domain, "password_expires_at": nil},
		"project":    map[string]any{"id": projectID(t.user.project), "name": t.user.project, "domain": domain},
		"roles":      roles,
		"is_domain":  false,
		"audit_ids":  []string{randomHex(8)},
		"issued_at":  t.issued.Format(layout),
		"expires_at": t.expires.Format(layout),
		"catalog": []any{map[string]any{
			"id": "s-keystone", "type": "identity", "name": "keystone", "endpoints": endpoints,
		}},
	}}
}
