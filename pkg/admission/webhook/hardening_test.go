package webhook

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	admissionv1 "k8s.io/api/admission/v1"
)

// TestHTTP2OnlyWithEnableHTTP2: HTTP/2 is off unless asked for
// (CVE-2023-44487, HTTP/2 rapid reset), so a client offering h2 gets
// http/1.1; with EnableHTTP2 it gets h2.
func TestHTTP2OnlyWithEnableHTTP2(t *testing.T) {
	for _, tc := range []struct {
		name      string
		enable    bool
		wantALPN  string
		wantProto string
	}{
		{"default", false, "http/1.1", "HTTP/1.1"},
		{"EnableHTTP2", true, "h2", "HTTP/2.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, ca := startFakeServer(t, fakeLookups{}, ServerOptions{EnableHTTP2: tc.enable}, testr.New(t))

			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", ts.hookAddr,
				&tls.Config{RootCAs: ca.pool, ServerName: "127.0.0.1", NextProtos: []string{"h2", "http/1.1"}})
			if err != nil {
				t.Fatal(err)
			}
			got := conn.ConnectionState().NegotiatedProtocol
			conn.Close()
			if got != tc.wantALPN {
				t.Errorf("ALPN with a client offering h2 and http/1.1: %q, want %q", got, tc.wantALPN)
			}

			// A review from a client that tries HTTP/2 first, as the API
			// server's does.
			hc := reviewClient(ca, true)
			hc.Transport.(*http.Transport).ForceAttemptHTTP2 = true
			resp, err := postReview(hc, ts.url(ValidateGlancePath), admissionRequest(t, admissionv1.Create, sampleGlance("http2"), nil), tc.wantProto)
			if err != nil {
				t.Fatal(err)
			}
			if !resp.Allowed {
				t.Fatalf("review denied: %+v", resp.Result)
			}
		})
	}
}

// TestMetricsServeControllerRuntimeCollectors: controller-runtime counts
// every review and certificate read in its own registry; /metrics serves
// them next to the server's own series.
func TestMetricsServeControllerRuntimeCollectors(t *testing.T) {
	ts, ca := startFakeServer(t, fakeLookups{}, ServerOptions{}, testr.New(t))
	// controller-runtime's registry is the process's: other servers of this
	// test binary count into it too, so the test looks at the increment.
	requests := func() float64 {
		f := ts.scrape(t)["controller_runtime_webhook_requests_total"]
		if f == nil {
			t.Fatal("/metrics has no controller_runtime_webhook_requests_total")
		}
		for _, m := range f.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["webhook"] == ValidateGlancePath && labels["code"] == "200" {
				return m.GetCounter().GetValue()
			}
		}
		t.Fatalf("controller_runtime_webhook_requests_total has no series for %s code 200: %v", ValidateGlancePath, f)
		return 0
	}
	before := requests()
	resp, err := postReview(reviewClient(ca, true), ts.url(ValidateGlancePath), admissionRequest(t, admissionv1.Create, sampleGlance("metrics"), nil))
	if err != nil || !resp.Allowed {
		t.Fatalf("review: %+v, %v", resp, err)
	}
	if after := requests(); after != before+1 {
		t.Errorf("controller_runtime_webhook_requests_total{webhook=%s,code=200}: %v after one review, want %v", ValidateGlancePath, after, before+1)
	}

	families := ts.scrape(t)
	if f := families["certwatcher_read_certificate_total"]; f == nil || f.Metric[0].GetCounter().GetValue() < 1 {
		t.Errorf("certwatcher_read_certificate_total: %v, want at least the first read", f)
	}
	// The server's own series are still there, once each.
	if f := families[RequestsMetric]; f == nil {
		t.Errorf("/metrics lost %s", RequestsMetric)
	}
	if f := families["go_goroutines"]; f == nil || len(f.Metric) != 1 {
		t.Errorf("go_goroutines: %v, want one series", f)
	}
}

// TestUnknownAdmissionReviewVersionIsRefused: only the AdmissionReview
// versions the server speaks are judged; any other is refused with HTTP
// 400 and counted as an error, never answered allowed.
func TestUnknownAdmissionReviewVersionIsRefused(t *testing.T) {
	ts, ca := startFakeServer(t, fakeLookups{}, ServerOptions{}, testr.New(t))
	hc := reviewClient(ca, true)
	request := mustJSON(t, admissionRequest(t, admissionv1.Create, sampleGlance("versions"), nil))

	for _, tc := range []struct {
		name, apiVersion, kind string
		wantStatus             int
	}{
		{"v1", "admission.k8s.io/v1", "AdmissionReview", http.StatusOK},
		{"v1beta1", "admission.k8s.io/v1beta1", "AdmissionReview", http.StatusOK},
		{"unknown version", "admission.k8s.io/v9", "AdmissionReview", http.StatusBadRequest},
		{"other group", "example.com/v1", "AdmissionReview", http.StatusBadRequest},
		{"no apiVersion", "", "AdmissionReview", http.StatusBadRequest},
		{"other kind", "admission.k8s.io/v1", "Pod", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errorsBefore := series(ts.scrape(t), RequestsMetric, ValidateGlancePath, VerdictError).GetCounter().GetValue()
			typeMeta := ""
			if tc.apiVersion != "" {
				typeMeta += `"apiVersion":"` + tc.apiVersion + `",`
			}
			typeMeta += `"kind":"` + tc.kind + `",`
			status, review := postStatus(t, hc, ts.url(ValidateGlancePath), `{`+typeMeta+`"request":`+request+`}`)
			if status != tc.wantStatus {
				t.Fatalf("HTTP %d, want %d; body %+v", status, tc.wantStatus, review)
			}
			errorsAfter := series(ts.scrape(t), RequestsMetric, ValidateGlancePath, VerdictError).GetCounter().GetValue()
			if status != http.StatusOK {
				if review.Response != nil && review.Response.Allowed {
					t.Errorf("refused review answered allowed: %+v", review.Response)
				}
				if errorsAfter != errorsBefore+1 {
					t.Errorf("error verdicts %v, want %v", errorsAfter, errorsBefore+1)
				}
				return
			}
			if review.APIVersion != tc.apiVersion || review.Kind != "AdmissionReview" {
				t.Errorf("answered as %s %s, want the request's %s AdmissionReview", review.APIVersion, review.Kind, tc.apiVersion)
			}
			if review.Response == nil || !review.Response.Allowed {
				t.Errorf("response %+v, want allowed", review.Response)
			}
			if errorsAfter != errorsBefore {
				t.Errorf("error verdicts %v, want %v", errorsAfter, errorsBefore)
			}
		})
	}
}

// postStatus posts body as JSON and returns the HTTP status and the
// AdmissionReview in the response, if any.
func postStatus(t *testing.T, hc *http.Client, url, body string) (int, admissionv1.AdmissionReview) {
	t.Helper()
	resp, err := hc.Post(url, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &review); err != nil && resp.StatusCode == http.StatusOK {
		t.Fatalf("HTTP 200 with a body that is not an AdmissionReview: %v: %s", err, strings.TrimSpace(string(data)))
	}
	return resp.StatusCode, review
}
