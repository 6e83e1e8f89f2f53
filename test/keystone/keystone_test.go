package keystone_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/c5c3/glance-operator/test/glanceclient"
	"github.com/c5c3/glance-operator/test/keystone"
)

// start serves a Keystone whose catalog names its own address.
func start(t *testing.T) (*keystone.Server, string) {
	t.Helper()
	var k *keystone.Server
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { k.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	k = keystone.New(srv.URL + "/v3/")
	return k, srv.URL + "/v3"
}

// validate GETs /v3/auth/tokens as keystonemiddleware does and returns the
// status and the decoded token.
func validate(t *testing.T, v3, caller, subject string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, v3+"/auth/tokens", nil)
	req.Header.Set("X-Auth-Token", caller)
	req.Header.Set("X-Subject-Token", subject)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Token map[string]any `json:"token"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Token
}

func TestDiscovery(t *testing.T) {
	k, v3 := start(t)
	if k.URL() != v3 {
		t.Errorf("URL() = %q, want %q without the trailing slash", k.URL(), v3)
	}
	resp, err := http.Get(v3)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"href":"`+v3+`/"`) {
		t.Errorf("GET /v3: HTTP %d %s", resp.StatusCode, body)
	}
}

func TestTokenIssueAndValidate(t *testing.T) {
	k, v3 := start(t)
	k.SetUser("glance", "pw", "service", "service", "admin")
	before := time.Now()
	if _, err := glanceclient.KeystoneToken(http.DefaultClient, v3, "glance", "wrong", "service"); err == nil {
		t.Error("a wrong password got a token")
	}
	if _, err := glanceclient.KeystoneToken(http.DefaultClient, v3, "glance", "pw", "other"); err == nil {
		t.Error("a project the user is not in got a token")
	}
	tok, err := glanceclient.KeystoneToken(http.DefaultClient, v3, "glance", "pw", "service")
	if err != nil || tok == "" {
		t.Fatalf("token %q, %v", tok, err)
	}

	code, body := validate(t, v3, tok, tok)
	if code != http.StatusOK {
		t.Fatalf("validating: HTTP %d", code)
	}
	project, _ := body["project"].(map[string]any)
	roles, _ := json.Marshal(body["roles"])
	catalog, _ := json.Marshal(body["catalog"])
	if project["name"] != "service" || !strings.Contains(string(roles), `"admin"`) || !strings.Contains(string(catalog), `"url":"`+v3+`"`) {
		t.Errorf("token: project %v, roles %s, catalog %s", project, roles, catalog)
	}
	if code, _ := validate(t, v3, "", tok); code != http.StatusUnauthorized {
		t.Errorf("validating without a caller token: HTTP %d, want 401", code)
	}
	if code, _ := validate(t, v3, tok, "gAAAAunknown"); code != http.StatusNotFound {
		t.Errorf("validating an unknown token: HTTP %d, want 404", code)
	}

	var ok []bool
	for _, a := range k.AttemptsSince("glance", before) {
		ok = append(ok, a.OK)
	}
	// The wrong project is refused after the password was accepted.
	if len(ok) != 3 || ok[0] || !ok[1] || !ok[2] {
		t.Errorf("attempts accepted: %v, want [false true true]", ok)
	}
	if n := len(k.AttemptsSince("glance", time.Now().Add(time.Second))); n != 0 {
		t.Errorf("%d attempts in the future", n)
	}
}

func TestRotationRevokesTokens(t *testing.T) {
	k, v3 := start(t)
	k.SetUser("glance", "old", "service", "admin")
	tok, err := glanceclient.KeystoneToken(http.DefaultClient, v3, "glance", "old", "service")
	if err != nil {
		t.Fatal(err)
	}
	k.SetUser("glance", "old", "service", "admin", "reader")
	if code, _ := validate(t, v3, tok, tok); code != http.StatusOK {
		t.Fatalf("a token after a change of roles only: HTTP %d, want 200", code)
	}
	k.SetUser("glance", "new", "service", "admin")
	if code, _ := validate(t, v3, tok, tok); code != http.StatusUnauthorized {
		t.Errorf("a token issued before the password changed: HTTP %d, want 401", code)
	}
	if _, err := glanceclient.KeystoneToken(http.DefaultClient, v3, "glance", "old", "service"); err == nil {
		t.Error("the old password still gets a token")
	}
	if _, err := glanceclient.KeystoneToken(http.DefaultClient, v3, "glance", "new", "service"); err != nil {
		t.Error(err)
	}
}
