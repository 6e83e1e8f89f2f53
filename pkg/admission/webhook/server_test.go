package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/pkg/admission"
)

func TestVerdictOf(t *testing.T) {
	invalid := func(errs ...*field.Error) *metav1.Status {
		st := apierrors.NewInvalid(glanceKind, "glance", errs).Status()
		return &st
	}
	p := field.NewPath("spec", "openStackRelease")
	for _, tc := range []struct {
		name    string
		allowed bool
		result  *metav1.Status
		want    string
	}{
		{"allowed", true, nil, VerdictAllowed},
		{"allowed with a status", true, &metav1.Status{Code: http.StatusOK}, VerdictAllowed},
		{"denied by a rule", false, invalid(field.Forbidden(p, "downgrade")), VerdictDenied},
		{"denied without details", false, &metav1.Status{Code: http.StatusForbidden}, VerdictDenied},
		{"denied without a status", false, nil, VerdictDenied},
		{"undecodable", false, &metav1.Status{Code: http.StatusBadRequest}, VerdictError},
		{"too large", false, &metav1.Status{Code: http.StatusRequestEntityTooLarge}, VerdictError},
		{"panic or encode failure", false, &metav1.Status{Code: http.StatusInternalServerError}, VerdictError},
		{"a lookup failed closed", false, invalid(field.Forbidden(p, "skip"), field.InternalError(p, errors.New("list failed"))), VerdictError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := verdictOf(tc.allowed, tc.result); got != tc.want {
				t.Errorf("verdictOf = %s, want %s", got, tc.want)
			}
		})
	}
}

// logBuffer collects log lines, safe for the server's goroutines.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) logger(verbosity int) logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.lines = append(b.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: verbosity})
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// startFakeServer runs a ready server with fake lookups and a certificate.
func startFakeServer(t testing.TB, lookups admission.Lookups, opts ServerOptions, log logr.Logger) (*testServer, *testCA) {
	t.Helper()
	opts.Lookups = lookups
	ts := startTestServer(t, nil, opts, log)
	ca := newTestCA(t)
	ts.installCertificate(t, ca, 1, time.Now().Add(time.Hour))
	ts.waitReady(t)
	return ts, ca
}

// TestReviewLogsIdentityNotContent checks that a review is logged by its
// identity and verdict, and that neither the object nor the response
// message (which quotes field values) reaches the log.
func TestReviewLogsIdentityNotContent(t *testing.T) {
	const secret = "hunter2-db-password"
	var logs logBuffer
	ts, ca := startFakeServer(t, fakeLookups{}, ServerOptions{}, logs.logger(1))
	hc := reviewClient(ca, true)

	denied := sampleGlance("logging")
	denied.Spec.ExtraConfig = map[string]map[string]string{"database": {"connection_password": secret + "\nother"}}
	allowed := sampleGlance("logging")
	allowed.Name = "glance-allowed"
	allowed.Spec.Deployment.TopologySpreadConstraints = nil // its selector names the pods of "glance"
	allowed.Spec.ExtraConfig = map[string]map[string]string{"database": {"connection_password": secret}}

	deniedReq := admissionRequest(t, admissionv1.Create, denied, nil)
	resp, err := postReview(hc, ts.url(ValidateGlancePath), deniedReq)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Allowed || !strings.Contains(resp.Result.Message, secret) {
		t.Fatalf("want a denial quoting the value (the reason not to log messages), got %+v", resp)
	}
	allowedReq := admissionRequest(t, admissionv1.Update, allowed, allowed)
	if resp, err := postReview(hc, ts.url(ValidateGlancePath), allowedReq); err != nil || !resp.Allowed {
		t.Fatalf("allowed review: %+v, %v", resp, err)
	}

	out := logs.String()
	if strings.Contains(out, secret) {
		t.Errorf("the log contains a field value:\n%s", out)
	}
	if strings.Contains(out, "registry.example.com") {
		t.Errorf("the log contains the object:\n%s", out)
	}
	for _, want := range []string{
		string(deniedReq.UID), `"verdict"="denied"`, `"operation"="CREATE"`, `"kind"="Glance"`, `"namespace"="logging"`, `"name"="glance"`,
		`spec.extraConfig[database][connection_password]`,
		string(allowedReq.UID), `"verdict"="allowed"`, `"operation"="UPDATE"`, `"name"="glance-allowed"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %s:\n%s", want, out)
		}
	}
}

// TestFailedLookupIsAnErrorVerdict: a lookup failure denies (fails closed)
// and is counted as an error, not as a rule's denial.
func TestFailedLookupIsAnErrorVerdict(t *testing.T) {
	ts, ca := startFakeServer(t, fakeLookups{err: errors.New("etcd is down")}, ServerOptions{}, testr.New(t))
	before := ts.verdictCounts(t)
	g := sampleGlance("lookups")
	g.Spec.Deployment.PriorityClassName = ptr.To("glance-critical")
	resp, err := postReview(reviewClient(ca, true), ts.url(ValidateGlancePath), admissionRequest(t, admissionv1.Create, g, nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Allowed {
		t.Fatal("a failed lookup was allowed")
	}
	counted := ts.verdictCounts(t).since(before)[ValidateGlancePath]
	if counted[VerdictError] != 1 || counted[VerdictDenied] != 0 {
		t.Errorf("verdicts counted: %v, want 1 error and no denial", counted)
	}
}

// stuckLookups never answers PriorityClassExists; it reports why the
// review's context ended.
type stuckLookups struct {
	fakeLookups
	entered chan struct{}
	cause   chan error
}

func newStuckLookups() stuckLookups {
	return stuckLookups{entered: make(chan struct{}, 16), cause: make(chan error, 16)}
}

func (s stuckLookups) PriorityClassExists(ctx context.Context, _ string) (bool, error) {
	s.entered <- struct{}{}
	<-ctx.Done()
	s.cause <- context.Cause(ctx)
	return false, ctx.Err()
}

func stuckReview(t *testing.T) *admissionv1.AdmissionRequest {
	g := sampleGlance("stuck")
	g.Spec.Deployment.PriorityClassName = ptr.To("any")
	return admissionRequest(t, admissionv1.Create, g, nil)
}

// TestShutdownTimeoutCancelsStuckReviews: a review that outlives the
// shutdown timeout is cancelled and RunServer returns, saying so.
func TestShutdownTimeoutCancelsStuckReviews(t *testing.T) {
	lookups := newStuckLookups()
	ts, ca := startFakeServer(t, lookups, ServerOptions{ShutdownTimeout: 100 * time.Millisecond}, testr.New(t))
	review := stuckReview(t)
	go func() { _, _ = postReview(reviewClient(ca, true), ts.url(ValidateGlancePath), review) }()
	receive(t, lookups.entered, "the review to reach its lookup")
	ts.cancel()

	err := receive(t, ts.done, "RunServer to return")
	ts.done <- err // for the cleanup
	if err == nil || !strings.Contains(err.Error(), "1 reviews in flight") {
		t.Fatalf("RunServer returned %v, want the shutdown timeout with 1 review in flight", err)
	}
	if cause := receive(t, lookups.cause, "the stuck review to end"); !errors.Is(cause, errDrainTimeout) {
		t.Fatalf("the stuck review ended with %v, want %v", cause, errDrainTimeout)
	}
}

// TestClientGoingAwayCancelsReview: detaching reviews from the server's
// shutdown must not detach them from their client; the API server gives up
// after its webhook timeout, and the lookup should stop then too.
func TestClientGoingAwayCancelsReview(t *testing.T) {
	lookups := newStuckLookups()
	ts, ca := startFakeServer(t, lookups, ServerOptions{}, testr.New(t))
	hc := reviewClient(ca, true)
	ctx, giveUp := context.WithCancel(context.Background())
	review := stuckReview(t)
	sent := make(chan error, 1)
	body := strings.NewReader(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` + mustJSON(t, review) + `}`)
	go func() { sent <- postUntilCancelled(ctx, hc, ts.url(ValidateGlancePath), body) }()
	receive(t, lookups.entered, "the review to reach its lookup")
	giveUp()
	if err := receive(t, sent, "the client to give up"); !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v, want context.Canceled", err)
	}
	if cause := receive(t, lookups.cause, "the review to end after its client went away"); cause == nil || errors.Is(cause, errDrainTimeout) {
		t.Fatalf("the review ended with cause %v, want the client's cancellation", cause)
	}
	if code := ts.probe("/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz after a client went away: %d", code)
	}
}

// postUntilCancelled posts body as JSON under ctx and returns how that
// ended: a review left hanging ends when ctx is cancelled.
func postUntilCancelled(ctx context.Context, hc *http.Client, url string, body io.Reader) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	_, err = hc.Do(req)
	return err
}

// TestStopsWhileWaitingForCertificate: without a certificate the server
// is alive, not ready, and stops cleanly.
func TestStopsWhileWaitingForCertificate(t *testing.T) {
	ts := startTestServer(t, nil, ServerOptions{Lookups: fakeLookups{}}, testr.New(t))
	waitFor(t, "/healthz to answer", func() error {
		if code := ts.probe("/healthz"); code != http.StatusOK {
			return errors.New("not answering")
		}
		return nil
	})
	if code := ts.probe("/readyz"); code == http.StatusOK {
		t.Fatal("/readyz is ready without a certificate")
	}
	ts.cancel()
	err := receive(t, ts.done, "RunServer to return")
	ts.done <- err
	if err != nil {
		t.Fatalf("RunServer: %v", err)
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRunServerRejectsBadOptions(t *testing.T) {
	for name, c := range map[string]struct {
		cfg  *rest.Config
		opts ServerOptions
		want string
	}{
		"port out of range": {noAPIServer, ServerOptions{Port: 70000, Lookups: fakeLookups{}}, "port 70000"},
		"negative timeout":  {noAPIServer, ServerOptions{ShutdownTimeout: -time.Second, Lookups: fakeLookups{}}, "negative"},
		"no config":         {nil, ServerOptions{}, "rest config"},
	} {
		t.Run(name, func(t *testing.T) {
			c.opts.HealthAddress, c.opts.MetricsAddress = DisabledAddress, DisabledAddress
			err := RunServer(context.Background(), c.cfg, c.opts, logr.Discard())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("RunServer: %v, want an error saying %q", err, c.want)
			}
		})
	}
}
