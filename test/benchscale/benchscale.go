// Package benchscale measures the operator at scale on the local cluster
// (`make bench-scale`): for each count N it starts the full stack of
// test/stack, as `make run` does, applies N Glances with their Secrets, a
// MariaDB and one default S3 backend each, waits until every one is Ready,
// and records how long that took, what the manager asked of the API server
// (counted by the API server, from an audit log of the manager's user, by
// verb and resource), how long its passes ran, its CPU and memory, its
// requests and writes while idle, and its memory after unrelated Secrets
// appear. It reports figures, never verdicts: the goals are judged by
// reading them.
package benchscale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/metrics"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/fixtures"
	"github.com/c5c3/glance-operator/test/operatortest"
	"github.com/c5c3/glance-operator/test/stack"
)

// Options configure a run.
type Options struct {
	// Counts are the numbers of Glances, each measured on a fresh stack.
	Counts []int
	// Dir holds each stack's state and logs (Dir/n-<N>) and the report.
	Dir string
	// Idle is how long the manager is watched at rest after all are Ready;
	// the idle figures are scaled to a minute.
	Idle time.Duration
	// UnrelatedSecrets are created in a namespace of their own once the
	// idle period is over, to see what they cost the manager's memory.
	UnrelatedSecrets int
	// Timeout bounds each count's wait for all-Ready, and the floor's.
	Timeout time.Duration
	// Floor measures the control-plane floor of each count first, on a
	// cluster of its own (see floor.go).
	Floor bool
	// ManagerArgs are extra glance-operator flags, to compare settings;
	// the report names them.
	ManagerArgs []string
	// Progress receives a line per step; nil discards them.
	Progress io.Writer
}

// Result are the figures of one count.
type Result struct {
	Glances int `json:"glances"`
	// Nodes is the number of kwok nodes the pods ran on.
	Nodes int `json:"nodes"`
	// AllReadySeconds is from the start of the apply to the last Ready;
	// ReadySeconds are the per-Glance times to Ready from the same start.
	AllReadySeconds float64      `json:"allReadySeconds"`
	ReadySeconds    Distribution `json:"readySeconds"`
	// FloorSeconds is the control-plane floor: the same workloads applied
	// directly, up; 0 when not measured.
	FloorSeconds float64 `json:"floorSeconds,omitempty"`
	// FloorReadySeconds are the floor's per-Glance times: from the start of
	// its apply until the Glance's Deployment is available and its Job
	// complete, both.
	FloorReadySeconds Distribution `json:"floorReadySeconds,omitempty"`
	// The manager's API requests while converging, per Glance, counted by
	// the API server from its audit log (see audit.go; a watch counts once,
	// when opened); writes are create, update, patch, delete and
	// deletecollection; failed are those answered with a status of 400 or
	// more (conflicts, not found).
	RequestsPerGlance float64 `json:"requestsPerGlance"`
	WritesPerGlance   float64 `json:"writesPerGlance"`
	FailedPerGlance   float64 `json:"failedPerGlance"`
	// Idle requests and writes, per minute, once all were Ready, from the
	// audit log.
	IdleRequestsPerMinute float64 `json:"idleRequestsPerMinute"`
	IdleWritesPerMinute   float64 `json:"idleWritesPerMinute"`
	// Requests are the audit counts by verb and resource.
	Requests []RequestRow `json:"requestsByVerbAndResource"`
	// Client are the same figures as the manager's client-go counts them.
	Client ClientRequests `json:"client"`
	// APIMillis is how long the manager's requests to the API server took
	// while converging, as its client saw them
	// (rest_client_request_duration_seconds; watches excluded), and
	// ThrottleMillis how long its client-side rate limit held them back
	// (rest_client_rate_limiter_duration_seconds).
	APIMillis      Distribution `json:"apiMillis"`
	ThrottleMillis Distribution `json:"throttleMillis"`
	// PassMillis is the Glance controller's reconcile time per pass while
	// converging (controller_runtime_reconcile_time_seconds); StepMillisP95
	// the p95 of each pipeline step (glance_operator_reconcile_duration_seconds).
	PassMillis        Distribution       `json:"passMillis"`
	BackendPassMillis Distribution       `json:"backendPassMillis"`
	StepMillisP95     map[string]float64 `json:"stepMillisP95"`
	Passes            float64            `json:"passes"`
	// PassSecondsPerGlance is the time the Glance controller's workers
	// spent on each Glance while converging: the passes' durations summed.
	PassSecondsPerGlance float64 `json:"passSecondsPerGlance"`
	// QueueWaitMillis is the mean time a Glance key waited in the
	// controller's work queue before a worker took it
	// (workqueue_queue_duration_seconds): its buckets are decades apart, so
	// a mean says more than their quantiles.
	QueueWaitMillis    float64 `json:"queueWaitMillis"`
	ManagerCPUSeconds  float64 `json:"managerCPUSeconds"`
	RSSKiB             int64   `json:"rssKiB"`
	HWMKiB             int64   `json:"hwmKiB"`
	UnrelatedSecrets   int     `json:"unrelatedSecrets"`
	RSSAfterUnrelated  int64   `json:"rssAfterUnrelatedKiB"`
	UnrelatedBytesEach float64 `json:"unrelatedBytesEach"`
	// UnrelatedHeapBytesEach is the growth of the manager's heap in use
	// (go_memstats_heap_inuse_bytes) per unrelated Secret.
	UnrelatedHeapBytesEach float64 `json:"unrelatedHeapBytesEach"`
	// CPUProfile is the manager's CPU profile over the first
	// ProfileSeconds of the apply (see profile.go); ProfileTop its
	// `go tool pprof -top`.
	CPUProfile     string `json:"cpuProfile"`
	ProfileSeconds int    `json:"profileSeconds"`
	ProfileTop     string `json:"profileTop"`
}

// RequestRow is one verb and resource of the manager's requests, from the
// audit log: the counts in the converging and idle windows, and the same
// per Glance and per idle minute.
type RequestRow struct {
	Verb string `json:"verb"`
	// Resource is resource[.group][/subresource], or the path of a
	// non-resource request.
	Resource         string  `json:"resource"`
	Converging       int     `json:"converging"`
	ConvergingFailed int     `json:"convergingFailed,omitempty"`
	Idle             int     `json:"idle"`
	PerGlance        float64 `json:"perGlance"`
	IdlePerMinute    float64 `json:"idlePerMinute"`
}

// ClientRequests are the manager's requests as its client-go counts them
// (rest_client_requests_total), by HTTP method: a watch is a GET, and a
// request the client retried counts each time.
type ClientRequests struct {
	RequestsPerGlance     float64            `json:"requestsPerGlance"`
	WritesPerGlance       float64            `json:"writesPerGlance"`
	RequestsByMethod      map[string]float64 `json:"requestsByMethod"`
	IdleRequestsPerMinute float64            `json:"idleRequestsPerMinute"`
	IdleWritesPerMinute   float64            `json:"idleWritesPerMinute"`
}

// Distribution is p50, p95 and max of a sample (a histogram's estimate
// for the pass times: no max there).
type Distribution struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	Max float64 `json:"max,omitempty"`
}

// distributionOf is the p50, p95 and max of sorted, a sample of at least
// one.
func distributionOf(sorted []float64) Distribution {
	return Distribution{P50: percentile(sorted, 50), P95: percentile(sorted, 95), Max: sorted[len(sorted)-1]}
}

// Report is a run's results and where they were taken.
type Report struct {
	Taken   time.Time `json:"taken"`
	CPUs    int       `json:"cpus"`
	Replica string    `json:"setup"`
	// ManagerArgs are the extra glance-operator flags of the run.
	ManagerArgs []string `json:"managerArgs,omitempty"`
	Results     []Result `json:"results"`
}

// setup says what each Glance is, for the report.
const setup = "each Glance: 1 replica, its DB and service-user Secrets, S3 credentials, one default S3 backend; one MariaDB per run; the stack's stand-ins answer /healthcheck"

// namespace is where the Glances go; unrelatedNamespace holds the
// unrelated Secrets.
const (
	namespace          = "bench"
	unrelatedNamespace = "bench-unrelated"
)

// Run measures every count in turn and returns the report; it writes
// nothing (see Write).
func Run(ctx context.Context, o Options) (*Report, error) {
	if len(o.Counts) == 0 {
		return nil, errors.New("no counts to measure")
	}
	for _, n := range o.Counts {
		if n < 1 {
			return nil, fmt.Errorf("count %d: measure at least one Glance", n)
		}
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	r := &Report{Taken: time.Now().UTC(), CPUs: runtime.NumCPU(), Replica: setup, ManagerArgs: o.ManagerArgs}
	for _, n := range o.Counts {
		res, err := measure(ctx, o, n)
		if err != nil {
			return r, fmt.Errorf("%d Glances: %w", n, err)
		}
		r.Results = append(r.Results, *res)
	}
	return r, nil
}

func (o Options) say(format string, args ...any) { fmt.Fprintf(o.Progress, format+"\n", args...) }

// nodesFor is enough kwok nodes (110 pods each) for n Glances' API pods
// and schema Jobs.
func nodesFor(n int) int { return 2 + (2*n)/100 }

func measure(ctx context.Context, o Options, n int) (_ *Result, err error) {
	res := &Result{Glances: n, Nodes: nodesFor(n), UnrelatedSecrets: o.UnrelatedSecrets}
	if o.Floor {
		floor, err := measureFloor(ctx, o, floorDir(o.Dir, n), n, res.Nodes)
		if err != nil {
			return nil, fmt.Errorf("control-plane floor: %w", err)
		}
		res.FloorReadySeconds = distributionOf(floor)
		res.FloorSeconds = res.FloorReadySeconds.Max
		o.say("%d Glances: control-plane floor %.1fs", n, res.FloorSeconds)
	}
	o.say("%d Glances: starting the stack on %d kwok nodes ...", n, res.Nodes)
	dir := filepath.Join(o.Dir, fmt.Sprintf("n-%d", n))
	// Each count starts from an empty cluster: stop what a killed run left
	// running there, then drop its state.
	if err := stack.StopRecorded(dir); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	ports, err := controlplane.FreePorts(1)
	if err != nil {
		return nil, err
	}
	pprofAddress := fmt.Sprintf("127.0.0.1:%d", ports[0])
	stk, err := stack.Start(ctx, stack.Options{
		Dir: dir, Nodes: res.Nodes, Progress: o.Progress, AuditManager: true,
		ManagerArgs: append([]string{"--pprof-bind-address=" + pprofAddress}, o.ManagerArgs...),
	})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stk.Stop()) }()
	// The benchmark's own client must not be what sets the pace.
	cfg := rest.CopyConfig(stk.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	cl, err := operatortest.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: cl.Scheme()})
	if err != nil {
		return nil, err
	}
	host, err := url.Parse(stk.BinariesServer())
	if err != nil {
		return nil, err
	}
	if err := prepare(ctx, cl); err != nil {
		return nil, err
	}

	audit := newAuditLog(stk.Cluster.AuditLog, stack.ServiceAccountUser(stk.ManagerServiceAccount))
	// What the manager asked while starting is not the Glances'.
	if _, err := audit.next(); err != nil {
		return nil, err
	}
	before, procBefore, err := snapshot(ctx, stk)
	if err != nil {
		return nil, err
	}
	readyCtx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	ready := watchReady(readyCtx, wc, n)
	res.CPUProfile, res.ProfileSeconds = filepath.Join(dir, profileFile), profileSeconds(res.FloorSeconds)
	profiled := captureProfile(ctx, pprofAddress, res.ProfileSeconds, res.CPUProfile)
	start := time.Now()
	o.say("%d Glances: applying ...", n)
	if err := apply(ctx, cl, n); err != nil {
		return nil, err
	}
	times, err := ready.wait(start)
	if err != nil {
		return nil, err
	}
	slices.Sort(times)
	res.ReadySeconds = distributionOf(times)
	res.AllReadySeconds = res.ReadySeconds.Max
	o.say("%d Glances: all Ready in %.1fs", n, res.AllReadySeconds)

	converging, err := audit.next()
	if err != nil {
		return nil, err
	}
	converged, proc, err := snapshot(ctx, stk)
	if err != nil {
		return nil, err
	}
	// After the figures of converging: the profile may run on past it.
	if err := <-profiled; err != nil {
		return nil, err
	}
	if res.ProfileTop, err = profileTop(ctx, res.CPUProfile, 15); err != nil {
		return nil, err
	}
	res.ManagerCPUSeconds = proc.CPUSeconds - procBefore.CPUSeconds
	res.RSSKiB, res.HWMKiB = proc.RSSKiB, proc.HWMKiB
	requests, writes, failed := converging.totals()
	res.RequestsPerGlance, res.WritesPerGlance, res.FailedPerGlance = float64(requests)/float64(n), float64(writes)/float64(n), float64(failed)/float64(n)
	res.Client.RequestsByMethod = diff(requestsByMethod(converged, host.Host), requestsByMethod(before, host.Host))
	total, clientWrites := requestTotals(res.Client.RequestsByMethod)
	res.Client.RequestsPerGlance, res.Client.WritesPerGlance = total/float64(n), clientWrites/float64(n)
	passes := histogramBetween(before, converged, "controller_runtime_reconcile_time_seconds", map[string]string{"controller": "glance"})
	res.Passes = passes.count / float64(n)
	res.PassSecondsPerGlance = passes.sum / float64(n)
	res.PassMillis = passes.millis()
	if waits := histogramBetween(before, converged, "workqueue_queue_duration_seconds", map[string]string{"name": "glance"}); waits.count > 0 {
		res.QueueWaitMillis = waits.sum / waits.count * 1000
	}
	res.BackendPassMillis = histogramBetween(before, converged, "controller_runtime_reconcile_time_seconds", map[string]string{"controller": "glancebackend"}).millis()
	res.StepMillisP95 = stepP95(converged, before)
	hostOnly := map[string]string{"host": host.Host}
	res.APIMillis = histogramBetween(before, converged, "rest_client_request_duration_seconds", hostOnly).millis()
	res.ThrottleMillis = histogramBetween(before, converged, "rest_client_rate_limiter_duration_seconds", hostOnly).millis()

	o.say("%d Glances: %s at rest ...", n, o.Idle)
	if err := sleep(ctx, o.Idle); err != nil {
		return nil, err
	}
	idleCounts, err := audit.next()
	if err != nil {
		return nil, err
	}
	idle, err := stk.ManagerMetrics(ctx)
	if err != nil {
		return nil, err
	}
	perMinute := float64(time.Minute) / float64(o.Idle)
	idleRequests, idleWrites, _ := idleCounts.totals()
	res.IdleRequestsPerMinute, res.IdleWritesPerMinute = float64(idleRequests)*perMinute, float64(idleWrites)*perMinute
	res.Requests = requestRows(converging, idleCounts, n, perMinute)
	clientIdle, clientIdleWrites := requestTotals(diff(requestsByMethod(idle, host.Host), requestsByMethod(converged, host.Host)))
	res.Client.IdleRequestsPerMinute, res.Client.IdleWritesPerMinute = clientIdle*perMinute, clientIdleWrites*perMinute

	if o.UnrelatedSecrets > 0 {
		o.say("%d Glances: %d unrelated Secrets ...", n, o.UnrelatedSecrets)
		baseMetrics, base, err := snapshot(ctx, stk)
		if err != nil {
			return nil, err
		}
		if err := unrelated(ctx, cl, o.UnrelatedSecrets); err != nil {
			return nil, err
		}
		// The informers of every cache that sees Secrets have had them
		// delivered once the manager's memory settles; a fixed wait keeps
		// the runs comparable.
		if err := sleep(ctx, 10*time.Second); err != nil {
			return nil, err
		}
		afterMetrics, after, err := snapshot(ctx, stk)
		if err != nil {
			return nil, err
		}
		res.RSSAfterUnrelated = after.RSSKiB
		res.UnrelatedBytesEach = float64(after.RSSKiB-base.RSSKiB) * 1024 / float64(o.UnrelatedSecrets)
		// RSS also holds garbage the runtime has not returned yet; the heap
		// in use says what the caches keep.
		res.UnrelatedHeapBytesEach = (gauge(afterMetrics, "go_memstats_heap_inuse_bytes") - gauge(baseMetrics, "go_memstats_heap_inuse_bytes")) / float64(o.UnrelatedSecrets)
	}
	return res, nil
}

// snapshot reads the manager's metrics and its process figures together.
func snapshot(ctx context.Context, stk *stack.Stack) (map[string]*dto.MetricFamily, processStats, error) {
	families, err := stk.ManagerMetrics(ctx)
	if err != nil {
		return nil, processStats{}, err
	}
	proc, err := readProcess(stk.ManagerPID())
	return families, proc, err
}

func millis(seconds float64) float64 {
	if math.IsNaN(seconds) {
		return 0
	}
	return seconds * 1000
}

func diff(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// requestTotals are all requests and the writes among them.
func requestTotals(byMethod map[string]float64) (total, writes float64) {
	for method, v := range byMethod {
		total += v
		switch method {
		case "POST", "PUT", "PATCH", "DELETE":
			writes += v
		}
	}
	return total, writes
}

// stepP95 is each pipeline step's p95, in milliseconds, between before and
// after.
func stepP95(after, before map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	name := metrics.Namespace + "_reconcile_duration_seconds"
	for _, m := range after[name].GetMetric() {
		step := label(m, metrics.LabelSubReconciler)
		if _, done := out[step]; done {
			continue
		}
		sel := map[string]string{metrics.LabelSubReconciler: step}
		out[step] = histogramBetween(before, after, name, sel).millis().P95
	}
	return out
}

// prepare creates the namespace, the ClusterSecretStore every Glance gates
// on by default (the stand-in reports it Ready) and the MariaDB.
func prepare(ctx context.Context, cl client.Client) error {
	for _, ns := range []string{namespace, unrelatedNamespace} {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	store := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"provider": map[string]any{"vault": map[string]any{"server": "http://openbao.openbao.svc:8200"}}},
	}}
	store.SetAPIVersion("external-secrets.io/v1")
	store.SetKind("ClusterSecretStore")
	store.SetName(v1alpha1.DefaultSecretStoreName)
	if err := cl.Create(ctx, store); err != nil {
		return fmt.Errorf("create the ClusterSecretStore: %w", err)
	}
	mdb := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(1)}}}
	mdb.SetAPIVersion("k8s.mariadb.com/v1alpha1")
	mdb.SetKind("MariaDB")
	mdb.SetNamespace(namespace)
	mdb.SetName("mariadb")
	return cl.Create(ctx, mdb)
}

// glanceName is the i-th Glance.
func glanceName(i int) string { return "glance-" + strconv.Itoa(i) }

// objectsOf are the i-th Glance and what it needs, in creation order.
func objectsOf(i int) []client.Object {
	name := glanceName(i)
	secret := func(suffix string, data map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-" + suffix}, StringData: data}
	}
	return []client.Object{
		secret("db", map[string]string{"username": "glance" + strconv.Itoa(i), "password": "bench-password"}),
		secret("service-user", map[string]string{"password": "bench-password"}),
		secret("s3", map[string]string{v1alpha1.S3AccessKeyIDKey: "ak", v1alpha1.S3SecretAccessKeyKey: "sk"}),
		fixtures.NewBackend(namespace, name+"-s3", name, true, name+"-s3"),
		glanceOf(i),
	}
}

// glanceOf is the i-th Glance: one replica, its own database and Secrets.
func glanceOf(i int) *v1alpha1.Glance {
	name := glanceName(i)
	g := fixtures.NewGlance(namespace, name, "2025.2")
	g.Spec.Database.Database = "glance_" + strconv.Itoa(i)
	g.Spec.Database.SecretRef.Name = name + "-db"
	g.Spec.ServiceUser.SecretRef.Name = name + "-service-user"
	g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{Replicas: ptr.To[int32](1)}
	return g
}

// applyWorkers create objects at once, as `kubectl apply` of a large
// manifest would not: the point is the operator's pace, not the client's.
const applyWorkers = 16

// apply creates n Glances and their objects.
func apply(ctx context.Context, cl client.Client, n int) error {
	return parallel(ctx, n, func(i int) error {
		for _, obj := range objectsOf(i) {
			if err := cl.Create(ctx, obj); err != nil {
				return fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
			}
		}
		return nil
	})
}

// unrelated creates n 2 KiB Secrets no Glance reads.
func unrelated(ctx context.Context, cl client.Client, n int) error {
	value := make([]byte, 2048)
	for i := range value {
		value[i] = 'x'
	}
	return parallel(ctx, n, func(i int) error {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: unrelatedNamespace, Name: "unrelated-" + strconv.Itoa(i), Labels: map[string]string{"app": "unrelated"}},
			Data:       map[string][]byte{"value": value},
		}
		return cl.Create(ctx, s)
	})
}

// parallel runs fn(0..n-1) on applyWorkers goroutines; the first error
// stops the rest.
func parallel(ctx context.Context, n int, fn func(i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(applyWorkers, n) {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					cancel(err)
				}
			}
		})
	}
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// readiness records when each Glance is first seen Ready for its
// generation.
type readiness struct {
	n    int
	done chan struct{}

	mu    sync.Mutex
	ready map[string]time.Time
	err   error
}

// watchReady watches the Glances of the namespace until n are Ready or ctx
// ends; a watch the server closes is started again.
func watchReady(ctx context.Context, wc client.WithWatch, n int) *readiness {
	r := &readiness{n: n, done: make(chan struct{}), ready: map[string]time.Time{}}
	go func() {
		defer close(r.done)
		for ctx.Err() == nil && !r.complete() {
			w, err := wc.Watch(ctx, &v1alpha1.GlanceList{}, client.InNamespace(namespace))
			if err != nil {
				r.fail(err)
				return
			}
			r.consume(w)
		}
		if !r.complete() {
			r.fail(fmt.Errorf("%d of %d Glances Ready: %w", r.count(), n, ctx.Err()))
		}
	}()
	return r
}

func (r *readiness) consume(w watch.Interface) {
	defer w.Stop()
	for ev := range w.ResultChan() {
		g, ok := ev.Object.(*v1alpha1.Glance)
		if !ok {
			continue
		}
		c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != g.Generation {
			continue
		}
		r.mu.Lock()
		if _, seen := r.ready[g.Name]; !seen {
			r.ready[g.Name] = time.Now()
		}
		full := len(r.ready) >= r.n
		r.mu.Unlock()
		if full {
			return
		}
	}
}

func (r *readiness) complete() bool { return r.count() >= r.n }

func (r *readiness) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ready)
}

func (r *readiness) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

// wait returns each Glance's seconds from start to Ready.
func (r *readiness) wait(start time.Time) ([]float64, error) {
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	out := make([]float64, 0, len(r.ready))
	for _, at := range r.ready {
		out = append(out, at.Sub(start).Seconds())
	}
	return out, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
