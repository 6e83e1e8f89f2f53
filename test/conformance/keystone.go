//go:build linux

package conformance

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"
)

// keystone is a stand-in Keystone v3 for keystonemiddleware: version
// discovery, password authentication with a project scope (POST
// /v3/auth/tokens) and token validation (GET /v3/auth/tokens, which, like
// Keystone, requires a valid token of the caller in X-Auth-Token). It knows
// its users' passwords and accepts nothing else; changing a password revokes
// the user's tokens, as Keystone does.
type keystone struct {
	// url is the versioned endpoint as pods see it (the catalog's URL).
	url string

	mu       sync.Mutex
	users    map[string]*keystoneUser // by name
	tokens   map[string]*keystoneToken
	attempts []authAttempt
}

type keystoneUser struct {
	id, name, password string
	project            string
	roles              []string
}

type keystoneToken struct {
	user    *keystoneUser
	issued  time.Time
	expires time.Time
}

// authAttempt is one password authentication: who, with which password
// (tests compare it, it is never logged), and whether it was accepted.
type authAttempt struct {
	user     string
	password string
	ok       bool
	at       time.Time
}

const (
	keystoneDomainID   = "default"
	keystoneDomainName = "Default"
)

func newKeystone(url string) *keystone {
	return &keystone{url: strings.TrimSuffix(url, "/"), users: map[string]*keystoneUser{}, tokens: map[string]*keystoneToken{}}
}

// setUser creates or updates a user; a changed password revokes its tokens.
func (k *keystone) setUser(name, password, project string, roles ...string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	u, ok := k.users[name]
	if !ok {
		u = &keystoneUser{id: randomHex(16), name: name}
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

// attemptsSince returns the password authentications of user since t.
func (k *keystone) attemptsSince(user string, t time.Time) []authAttempt {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []authAttempt
	for _, a := range k.attempts {
		if a.user == user && !a.at.Before(t) {
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

func (k *keystone) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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

func (k *keystone) version() map[string]any {
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
	return id == keystoneDomainID || name == keystoneDomainName
}

func (k *keystone) authenticate(w http.ResponseWriter, r *http.Request) {
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
	k.attempts = append(k.attempts, authAttempt{user: pu.Name, password: pu.Password, ok: ok, at: time.Now()})
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
	t := &keystoneToken{user: u, issued: now, expires: now.Add(time.Hour)}
	tokenID := "gAAAA" + randomHex(32)
	k.tokens[tokenID] = t
	w.Header().Set("X-Subject-Token", tokenID)
	writeJSON(w, http.StatusCreated, k.tokenBody(t))
}

func (k *keystone) validate(w http.ResponseWriter, r *http.Request) {
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

func (k *keystone) tokenBody(t *keystoneToken) map[string]any {
	const layout = "2006-01-02T15:04:05.000000Z"
	domain := map[string]any{"id": keystoneDomainID, "name": keystoneDomainName}
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
