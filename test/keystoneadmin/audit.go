package keystoneadmin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// AuditConfig is what keystone.conf needs for Keystone to record each
// password authentication where Authentications reads it: CADF
// notifications through oslo.messaging's log driver, in Keystone's log.
// Keystone opts out of the successful authentications by default; only the
// pending ones (which no password authentication emits) stay out.
const AuditConfig = `[DEFAULT]
notification_format = cadf
notification_opt_out = identity.authenticate.pending

[oslo_messaging_notifications]
driver = log
`

// Authentication is one password authentication Keystone audited.
type Authentication struct {
	// UserID is empty when no user had the name.
	UserID, User string
	OK           bool
	At           time.Time
}

// authenticateLogger is the logger of the log driver's identity.authenticate
// notifications; each is one line ending in the notification as JSON.
var authenticateLogger = []byte(" oslo.messaging.notification.identity.authenticate ")

// cadfTime is the layout of a CADF event's eventTime.
const cadfTime = "2006-01-02T15:04:05.999999-0700"

// Authentications are the password authentications in a log of Keystone's
// configured with AuditConfig, in the log's order. A notification line it
// cannot read is an error: a changed format must not read as no
// authentication at all.
func Authentications(log []byte) ([]Authentication, error) {
	var out []Authentication
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, authenticateLogger) {
			continue
		}
		// The JSON follows the context's closing bracket.
		i := bytes.Index(line, []byte("] {"))
		if i < 0 {
			return nil, fmt.Errorf("a Keystone authentication notification without JSON: %.200s", line)
		}
		var n struct {
			EventType string `json:"event_type"`
			Payload   struct {
				EventTime string `json:"eventTime"`
				Action    string `json:"action"`
				Outcome   string `json:"outcome"`
				Initiator struct {
					UserID   string `json:"user_id"`
					Username string `json:"username"`
					// user_name: a name no user has.
					UserName string `json:"user_name"`
				} `json:"initiator"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(line[i+2:], &n); err != nil {
			return nil, fmt.Errorf("a Keystone authentication notification: %w: %.200s", err, line)
		}
		p := n.Payload
		at, err := time.Parse(cadfTime, p.EventTime)
		if err != nil || n.EventType != "identity.authenticate" || p.Action != "authenticate" || (p.Outcome != "success" && p.Outcome != "failure") {
			return nil, fmt.Errorf("a Keystone authentication notification of event %q, action %q, outcome %q at %q: %.200s", n.EventType, p.Action, p.Outcome, p.EventTime, line)
		}
		user := p.Initiator.Username
		if user == "" {
			user = p.Initiator.UserName
		}
		out = append(out, Authentication{UserID: p.Initiator.UserID, User: user, OK: p.Outcome == "success", At: at})
	}
	return out, sc.Err()
}
