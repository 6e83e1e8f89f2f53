package benchscale

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// The manager's API requests are counted by the API server: its audit log
// (stack.Options.AuditManager) holds one Metadata event per request of the
// manager's user at ResponseComplete, and for a watch one more when it is
// opened (ResponseStarted). A request counts once, at its first event: a
// watch when it is opened, however long it stays open and however many
// changes it carries; its end is not counted again.

// requestKey is a verb and what it was asked of: resource[.group][/subresource],
// or the path of a non-resource request (discovery).
type requestKey struct{ Verb, Resource string }

// tally is a key's requests and how many of them the API server answered
// with a status of 400 or more.
type tally struct{ Requests, Failed int }

// requestCounts are a window's requests by verb and resource.
type requestCounts map[requestKey]tally

// writeVerbs are the verbs that change what is stored.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// totals are all requests, the writes and the failed among them.
func (c requestCounts) totals() (requests, writes, failed int) {
	for k, t := range c {
		requests += t.Requests
		failed += t.Failed
		if slices.Contains(writeVerbs, k.Verb) {
			writes += t.Requests
		}
	}
	return requests, writes, failed
}

// auditLog follows an audit log a window at a time.
type auditLog struct {
	path string
	// user is whose requests count; the policy logs nobody else's, and
	// this keeps the count right if it did.
	user   string
	offset int64
	// open are the long-running requests counted at ResponseStarted, whose
	// ResponseComplete must not count again; kept across windows.
	open map[types.UID]bool
}

func newAuditLog(path, user string) *auditLog {
	return &auditLog{path: path, user: user, open: map[types.UID]bool{}}
}

// next counts the requests logged since the last call. A line still being
// written is left for the next call.
func (a *auditLog) next() (requestCounts, error) {
	f, err := os.Open(a.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(a.offset, io.SeekStart); err != nil {
		return nil, err
	}
	counts := requestCounts{}
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return counts, nil
		}
		if err != nil {
			return nil, err
		}
		var ev auditv1.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, fmt.Errorf("%s at offset %d: %w", a.path, a.offset, err)
		}
		a.offset += int64(len(line))
		a.count(&ev, counts)
	}
}

// count adds the request of ev to counts, once per request.
func (a *auditLog) count(ev *auditv1.Event, counts requestCounts) {
	if ev.User.Username != a.user {
		return
	}
	switch ev.Stage {
	case auditv1.StageResponseStarted:
		a.open[ev.AuditID] = true
	case auditv1.StageResponseComplete, auditv1.StagePanic:
		if a.open[ev.AuditID] {
			delete(a.open, ev.AuditID)
			return
		}
	default:
		return
	}
	key := requestKey{Verb: ev.Verb, Resource: resourceOf(ev)}
	t := counts[key]
	t.Requests++
	if ev.ResponseStatus != nil && ev.ResponseStatus.Code >= 400 {
		t.Failed++
	}
	counts[key] = t
}

// resourceOf names what ev asked of as kubectl does, resource.group, with
// the subresource after a slash; a non-resource request by its path.
func resourceOf(ev *auditv1.Event) string {
	ref := ev.ObjectRef
	if ref == nil || ref.Resource == "" {
		path, _, _ := strings.Cut(ev.RequestURI, "?")
		return path
	}
	r := ref.Resource
	if ref.APIGroup != "" {
		r += "." + ref.APIGroup
	}
	if ref.Subresource != "" {
		r += "/" + ref.Subresource
	}
	return r
}

// requestRows are the two windows' counts as report rows, the most
// requested while converging first.
func requestRows(converging, idle requestCounts, n int, perMinute float64) []RequestRow {
	keys := map[requestKey]bool{}
	for k := range converging {
		keys[k] = true
	}
	for k := range idle {
		keys[k] = true
	}
	rows := make([]RequestRow, 0, len(keys))
	for k := range keys {
		c, i := converging[k], idle[k]
		rows = append(rows, RequestRow{
			Verb: k.Verb, Resource: k.Resource,
			Converging: c.Requests, ConvergingFailed: c.Failed, Idle: i.Requests,
			PerGlance: float64(c.Requests) / float64(n), IdlePerMinute: float64(i.Requests) * perMinute,
		})
	}
	slices.SortFunc(rows, func(a, b RequestRow) int {
		return cmp.Or(b.Converging-a.Converging, b.Idle-a.Idle, cmp.Compare(a.Verb, b.Verb), cmp.Compare(a.Resource, b.Resource))
	})
	return rows
}
