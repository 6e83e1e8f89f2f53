package keystoneadmin

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// TestAuthentications reads a log of Debian trixie's Keystone 27 under
// uWSGI, configured with AuditConfig, in which admin authenticated, then
// failed with a wrong password, then a user named nobody, whom Keystone
// does not know, failed; uWSGI's lines and another notification (a user
// updated) are not authentications.
func TestAuthentications(t *testing.T) {
	log, err := os.ReadFile("testdata/keystone.log")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Authentications(log)
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	const admin = "beb7e029c8f54632ab6da25dbfe4c359"
	want := []Authentication{
		{UserID: admin, User: "admin", OK: true, At: at("2026-12-07T15:12:33.539565Z")},
		{UserID: admin, User: "admin", OK: false, At: at("2026-12-07T15:12:36.043616Z")},
		{User: "nobody", OK: false, At: at("2026-12-07T15:12:36.097640Z")},
	}
	if len(got) != len(want) {
		t.Fatalf("%d authentications, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].UserID != want[i].UserID || got[i].User != want[i].User || got[i].OK != want[i].OK || !got[i].At.Equal(want[i].At) {
			t.Errorf("authentication %d: %+v, want %+v", i, got[i], want[i])
		}
	}

	// A notification line cut short is an error, not one authentication
	// fewer.
	lines := bytes.Split(log, []byte("\n"))
	lines[2] = lines[2][:len(lines[2])/2]
	if _, err := Authentications(bytes.Join(lines, []byte("\n"))); err == nil || !strings.Contains(err.Error(), "notification") {
		t.Errorf("a cut notification: %v, want an error", err)
	}
}
