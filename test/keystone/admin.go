package keystone

import (
	"encoding/json"
	"net/http"
	"time"
)

// UserRequest is the body of PUT /users/{name} on the admin API.
type UserRequest struct {
	Password string   `json:"password"`
	Project  string   `json:"project"`
	Roles    []string `json:"roles"`
}

// AdminHandler serves what a test does to Keystone when the stand-in runs
// in a pod: PUT /users/{name} (a UserRequest) sets a user, as an operator
// changing a password would, and GET /attempts?user=U&since=RFC3339Nano
// returns the user's password authentications since then as a JSON list
// of Attempt. It reveals passwords, so serve it on a port of its own.
func (k *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /users/{name}", func(w http.ResponseWriter, r *http.Request) {
		var req UserRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			adminError(w, http.StatusBadRequest, "decoding the user: "+err.Error())
			return
		}
		switch {
		case req.Password == "":
			adminError(w, http.StatusBadRequest, "password is required")
		case req.Project == "":
			adminError(w, http.StatusBadRequest, "project is required")
		default:
			k.SetUser(r.PathValue("name"), req.Password, req.Project, req.Roles...)
			w.WriteHeader(http.StatusNoContent)
		}
	})
	mux.HandleFunc("GET /attempts", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("user") == "" {
			adminError(w, http.StatusBadRequest, "user is required")
			return
		}
		var since time.Time
		if s := q.Get("since"); s != "" {
			var err error
			if since, err = time.Parse(time.RFC3339Nano, s); err != nil {
				adminError(w, http.StatusBadRequest, "since is not an RFC 3339 time: "+err.Error())
				return
			}
		}
		attempts := k.AttemptsSince(q.Get("user"), since)
		if attempts == nil {
			attempts = []Attempt{}
		}
		writeJSON(w, http.StatusOK, attempts)
	})
	return mux
}

func adminError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
