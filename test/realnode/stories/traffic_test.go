package stories

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/test/glanceclient"
	"github.com/c5c3/glance-operator/test/realnode"
)

// trafficPort is where a traffic pod serves its stats.
const trafficPort = 8080

// traffic is a client pod sending list, download and upload requests
// through Glance's Service by its DNS name, without pause.
type traffic struct {
	// stats is the pod's stats endpoint, by pod IP.
	stats string
}

// traffic is the scene's traffic: on the first call it runs a traffic pod
// and waits until its first requests are done; the stories after it report
// their own windows of the same client.
func (s *scene) traffic(t *testing.T) *traffic {
	t.Helper()
	if s.tr != nil {
		return s.tr
	}
	ctx := t.Context()
	pod := env.ProbePod("traffic", "traffic", "-addr", fmt.Sprintf(":%d", trafficPort), "-workers", "2", "-size", "65536",
		"-api", s.APIURL(), "-keystone", s.KeystoneURL(), "-password", realnode.DemoPassword)
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(trafficPort)}},
		PeriodSeconds: 1,
	}
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	start := time.Now()
	if _, err := env.CS.CoreV1().Pods(s.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready, err := env.WaitPodReady(ctx, s.Namespace, pod.Name)
	if err != nil {
		t.Fatalf("%v; log:\n%s", err, env.PodLog(t, s.Namespace, pod.Name))
	}
	tr := &traffic{stats: fmt.Sprintf("http://%s:%d/stats", ready.Status.PodIP, trafficPort)}
	// The client's first requests fetch a token and warm both sides up; on
	// a loaded node they take seconds.
	tr.served(t, "traffic before the story", start)
	s.tr = tr
	return tr
}

// served waits until a few requests started since from have ended, and
// fails the test unless all of them were served.
func (tr *traffic) served(t *testing.T, what string, from time.Time) {
	t.Helper()
	var st glanceclient.Stats
	for deadline := time.Now().Add(time.Minute); ; {
		time.Sleep(time.Second)
		if st = tr.window(t, from, time.Now()); st.Failed > 0 || st.Requests >= 3 || time.Now().After(deadline) {
			break
		}
	}
	if st.Requests < 3 || st.Failed > 0 {
		t.Fatalf("%s, %s after %s: %+v", what, time.Since(from).Round(time.Second), from.Format(time.TimeOnly), st)
	}
}

// window is what the traffic saw of the requests it started between from
// and to.
func (tr *traffic) window(t *testing.T, from, to time.Time) glanceclient.Stats {
	t.Helper()
	q := url.Values{"from": {from.UTC().Format(time.RFC3339Nano)}, "to": {to.UTC().Format(time.RFC3339Nano)}}
	resp, err := http.Get(tr.stats + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st glanceclient.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// report logs the requests of the window, their latency and failures;
// strict, a failure fails the test. It returns the window's stats.
func (tr *traffic) report(t *testing.T, what string, from, to time.Time, strict bool) glanceclient.Stats {
	t.Helper()
	// Requests started before to may still be running: let them end.
	st := tr.window(t, from, to)
	for deadline := time.Now().Add(time.Minute); st.Pending > 0 && time.Now().Before(deadline); st = tr.window(t, from, to) {
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("%s (%s): %d requests %v, %d failed, p50 %s, p99 %s, max %s", what, to.Sub(from).Round(100*time.Millisecond),
		st.Requests, st.ByOp, st.Failed, st.P50.Round(time.Millisecond), st.P99.Round(time.Millisecond), st.Max.Round(time.Millisecond))
	if st.Requests == 0 {
		t.Errorf("%s: no request ran", what)
	}
	fail := t.Logf
	if strict {
		fail = t.Errorf
	}
	for _, e := range st.Errors {
		fail("%s: %s at %s failed after %s: %s", what, e.Op, e.At.Format(time.TimeOnly+".000"), e.Dur.Round(time.Millisecond), e.Err)
	}
	return st
}

// podUIDs are the running Glance pods and their restart counts.
func (s *scene) podUIDs(t *testing.T) map[string]int32 {
	t.Helper()
	pods := map[string]int32{}
	for _, p := range env.RunningPods(t, s.Namespace, realnode.GlanceName) {
		var restarts int32
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
		pods[string(p.UID)] = restarts
	}
	return pods
}
