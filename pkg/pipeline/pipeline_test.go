package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
)

type (
	glance = *v1alpha1.Glance
	// pass is the per-pass state of the test pipelines: it records what ran.
	pass  = *trace
	step  = pipeline.Step[glance, pass]
	stage = pipeline.Stage[glance, pass]
)

// trace records the steps that ran. Group members append to it too, which
// the pipeline's read-only rule for state would forbid in a reconciler; it is
// locked, and it is how the tests see what ran.
type trace struct {
	mu  sync.Mutex
	ran []string
	// digest is written by one sequential step and read by later ones.
	digest string
}

func (tr *trace) add(name string) {
	tr.mu.Lock()
	tr.ran = append(tr.ran, name)
	tr.mu.Unlock()
}

func (tr *trace) steps() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.ran)
}

// The test pipelines aggregate three sub-conditions.
const (
	condA = "AReady"
	condB = "BReady"
	condC = "CReady"
	ready = "Ready"
)

var subConditions = []string{condA, condB, condC}

// ok is a step that reports its condition True and continues.
func ok(name, cond string) step {
	return step{Name: name, Condition: cond, Run: func(_ context.Context, g glance, tr pass) (ctrl.Result, error) {
		tr.add(name)
		pipeline.SetCondition(g, cond, metav1.ConditionTrue, "Fine", name+" is fine.")
		return ctrl.Result{}, nil
	}}
}

// waiting is a step that reports its condition False and still continues,
// like the Backends step on a waiting state.
func waiting(name, cond string) step {
	return step{Name: name, Condition: cond, Run: func(_ context.Context, g glance, tr pass) (ctrl.Result, error) {
		tr.add(name)
		pipeline.SetCondition(g, cond, metav1.ConditionFalse, "Waiting", name+" waits.")
		return ctrl.Result{}, nil
	}}
}

// requeue is a step that reports False and asks to come back after d.
func requeue(name, cond string, d time.Duration) step {
	return step{Name: name, Condition: cond, Run: func(_ context.Context, g glance, tr pass) (ctrl.Result, error) {
		tr.add(name)
		pipeline.SetCondition(g, cond, metav1.ConditionFalse, "Polling", name+" polls.")
		return ctrl.Result{RequeueAfter: d}, nil
	}}
}

// failing is a step that reports False and returns err.
func failing(name, cond string, err error) step {
	return step{Name: name, Condition: cond, Run: func(_ context.Context, g glance, tr pass) (ctrl.Result, error) {
		tr.add(name)
		pipeline.SetCondition(g, cond, metav1.ConditionFalse, "Failed", name+" failed.")
		return ctrl.Result{}, err
	}}
}

// panicking is a step that panics with a value that must not leak.
func panicking(name, cond string) step {
	return step{Name: name, Condition: cond, Run: func(_ context.Context, _ glance, tr pass) (ctrl.Result, error) {
		tr.add(name)
		panic("s3cr3t-value")
	}}
}

// panickingConcurrently panics in one of the calls it runs concurrently.
func panickingConcurrently(name, cond string) step {
	return step{Name: name, Condition: cond, Run: func(_ context.Context, _ glance, tr pass) (ctrl.Result, error) {
		tr.add(name)
		return ctrl.Result{}, pipeline.Concurrently(
			func() error { return nil },
			func() error { panic("s3cr3t-value") },
		)
	}}
}

// env is a fake API server holding one Glance, with every write counted.
type env struct {
	client client.Client
	writes *writes
	reg    *prometheus.Registry
	p      *pipeline.Pipeline[glance, pass]
}

func newEnv(t *testing.T, g *v1alpha1.Glance, stages ...stage) *env {
	t.Helper()
	w := &writes{}
	c := fake.NewClientBuilder().
		WithScheme(newScheme(t)).
		WithStatusSubresource(&v1alpha1.Glance{}).
		WithObjects(g).
		WithInterceptorFuncs(w.funcs()).
		Build()
	m, reg := newMetrics(t)
	return &env{client: c, writes: w, reg: reg, p: &pipeline.Pipeline[glance, pass]{
		Stages:        stages,
		Aggregate:     ready,
		SubConditions: subConditions,
		Metrics:       m,
		Status:        c.Status(),
	}}
}

// get reads the Glance back from the fake API server.
func (e *env) get(t *testing.T) *v1alpha1.Glance {
	t.Helper()
	var g v1alpha1.Glance
	if err := e.client.Get(context.Background(), client.ObjectKey{Namespace: "openstack", Name: "glance"}, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

// run reads the Glance and runs the pipeline on it.
func (e *env) run(t *testing.T) (*v1alpha1.Glance, *trace, ctrl.Result, error) {
	t.Helper()
	g := e.get(t)
	tr := &trace{}
	res, err := e.p.Run(context.Background(), g, tr)
	return g, tr, res, err
}

func newGlance(conds ...metav1.Condition) *v1alpha1.Glance {
	return &v1alpha1.Glance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance", Generation: 3},
		Status:     v1alpha1.GlanceStatus{Conditions: conds},
	}
}

func condition(t *testing.T, g *v1alpha1.Glance, typ string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(g.Status.Conditions, typ)
	if c == nil {
		t.Fatalf("condition %s missing; conditions: %+v", typ, g.Status.Conditions)
	}
	return *c
}

func wantCondition(t *testing.T, g *v1alpha1.Glance, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	c := condition(t, g, typ)
	if c.Status != status || c.Reason != reason {
		t.Errorf("condition %s = %s/%s (%q), want %s/%s", typ, c.Status, c.Reason, c.Message, status, reason)
	}
	return c
}

func TestStagesRunInOrderAndShareState(t *testing.T) {
	var groupSaw [2]string
	writeDigest := step{Name: "Digest", Condition: condA, Run: func(_ context.Context, g glance, tr pass) (ctrl.Result, error) {
		tr.add("Digest")
		tr.digest = "abc"
		pipeline.SetCondition(g, condA, metav1.ConditionTrue, "Fine", "")
		return ctrl.Result{}, nil
	}}
	readDigest := func(i int, name, cond string) step {
		return step{Name: name, Condition: cond, Run: func(_ context.Context, g glance, tr pass) (ctrl.Result, error) {
			tr.add(name)
			groupSaw[i] = tr.digest
			pipeline.SetCondition(g, cond, metav1.ConditionTrue, "Fine", "")
			return ctrl.Result{}, nil
		}}
	}
	e := newEnv(t, newGlance(),
		pipeline.Single(writeDigest),
		pipeline.Single(ok("Second", condB)),
		pipeline.Parallel(readDigest(0, "MemberX", condC), readDigest(1, "MemberY", condC+"Y")))

	_, tr, res, err := e.run(t)
	if err != nil || !res.IsZero() {
		t.Fatalf("Run = %+v, %v; want zero result, nil", res, err)
	}
	ran := tr.steps()
	if len(ran) != 4 || ran[0] != "Digest" || ran[1] != "Second" {
		t.Fatalf("ran %v, want Digest, Second, then both members", ran)
	}
	if members := slices.Sorted(slices.Values(ran[2:])); !slices.Equal(members, []string{"MemberX", "MemberY"}) {
		t.Errorf("group ran %v, want MemberX and MemberY", members)
	}
	if groupSaw != [2]string{"abc", "abc"} {
		t.Errorf("group members saw digest %q, want the one the first step wrote", groupSaw)
	}
}

func TestShortCircuit(t *testing.T) {
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name       string
		stop       step
		wantResult ctrl.Result
		wantErr    error
	}{
		{"RequeueAfter", requeue("Stop", condB, 10*time.Second), ctrl.Result{RequeueAfter: 10 * time.Second}, nil},
		{"deprecated Requeue", step{Name: "Stop", Condition: condB, Run: func(_ context.Context, g glance, tr pass) (ctrl.Result, error) {
			tr.add("Stop")
			pipeline.SetCondition(g, condB, metav1.ConditionFalse, "Polling", "")
			return ctrl.Result{Requeue: true}, nil
		}}, ctrl.Result{Requeue: true}, nil},
		{"error", failing("Stop", condB, errBoom), ctrl.Result{}, errBoom},
		{"error with a result", step{Name: "Stop", Condition: condB, Run: func(_ context.Context, g glance, tr pass) (ctrl.Result, error) {
			tr.add("Stop")
			pipeline.SetCondition(g, condB, metav1.ConditionFalse, "Failed", "")
			return ctrl.Result{RequeueAfter: time.Minute}, errBoom
		}}, ctrl.Result{}, errBoom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, newGlance(),
				pipeline.Single(ok("First", condA)),
				pipeline.Single(tc.stop),
				pipeline.Single(ok("Third", condC)),
				pipeline.Parallel(ok("Member", condC+"M")))

			g, tr, res, err := e.run(t)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Run error = %v, want %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "step Stop") {
				t.Errorf("error %q does not name the step", err)
			}
			if res != tc.wantResult {
				t.Errorf("Run result = %+v, want %+v", res, tc.wantResult)
			}
			if ran := tr.steps(); !slices.Equal(ran, []string{"First", "Stop"}) {
				t.Errorf("ran %v, want First, Stop", ran)
			}
			// The short-circuit still went through the status skeleton.
			if n := len(e.writes.statusPatches()); n != 1 {
				t.Fatalf("%d status writes, want 1", n)
			}
			stored := e.get(t)
			wantCondition(t, stored, condA, metav1.ConditionTrue, "Fine")
			wantCondition(t, stored, condB, metav1.ConditionFalse, condition(t, g, condB).Reason)
			wantCondition(t, stored, ready, metav1.ConditionFalse, pipeline.ReasonNotAllReady)
			if meta.FindStatusCondition(stored.Status.Conditions, condC) != nil {
				t.Errorf("condition of a step after the short-circuit was written: %+v", stored.Status.Conditions)
			}
		})
	}
}

func TestWaitingStepDoesNotShortCircuit(t *testing.T) {
	e := newEnv(t, newGlance(),
		pipeline.Single(ok("First", condA)),
		pipeline.Single(waiting("Backends", condB)),
		pipeline.Single(ok("Third", condC)))

	g, tr, res, err := e.run(t)
	if err != nil || !res.IsZero() {
		t.Fatalf("Run = %+v, %v; want zero result, nil", res, err)
	}
	if ran := tr.steps(); !slices.Equal(ran, []string{"First", "Backends", "Third"}) {
		t.Errorf("ran %v, want all three", ran)
	}
	wantCondition(t, g, condB, metav1.ConditionFalse, "Waiting")
	wantCondition(t, g, condC, metav1.ConditionTrue, "Fine")
	ready := wantCondition(t, g, ready, metav1.ConditionFalse, pipeline.ReasonNotAllReady)
	if ready.Message != "BReady: Waiting." {
		t.Errorf("Ready message %q, want it to list BReady only", ready.Message)
	}
}

func TestParallelMergesEveryConditionWhenAMemberFails(t *testing.T) {
	errB := errors.New("b broke")
	e := newEnv(t, newGlance(),
		pipeline.Single(ok("First", condA)),
		pipeline.Parallel(ok("MemberOK", condB), failing("MemberFail", "FailReady", errB), ok("MemberOK2", condC)))

	g, tr, _, err := e.run(t)
	if !errors.Is(err, errB) {
		t.Fatalf("Run error = %v, want %v", err, errB)
	}
	if len(tr.steps()) != 4 {
		t.Errorf("ran %v, want every member despite the failure", tr.steps())
	}
	for _, stored := range []*v1alpha1.Glance{g, e.get(t)} {
		wantCondition(t, stored, condB, metav1.ConditionTrue, "Fine")
		wantCondition(t, stored, condC, metav1.ConditionTrue, "Fine")
		wantCondition(t, stored, "FailReady", metav1.ConditionFalse, "Failed")
	}
}

// barrier is where n concurrent callers meet: arrive returns true once all
// have arrived, and false if they never do (callers run one after another
// never get past the first), after a minute that only guards against a hang.
type barrier struct {
	arrived  sync.WaitGroup
	together chan struct{}
}

func newBarrier(n int) *barrier {
	b := &barrier{together: make(chan struct{})}
	b.arrived.Add(n)
	go func() { b.arrived.Wait(); close(b.together) }()
	return b
}

func (b *barrier) arrive() bool {
	b.arrived.Done()
	select {
	case <-b.together:
		return true
	case <-time.After(time.Minute):
		return false
	}
}

func TestParallelMembersRunConcurrentlyOnCopies(t *testing.T) {
	together := newBarrier(3)
	primary := newGlance()
	var mu sync.Mutex
	var seen []glance
	member := func(name, cond string) step {
		return step{Name: name, Condition: cond, Run: func(_ context.Context, g glance, tr pass) (ctrl.Result, error) {
			tr.add(name)
			if !together.arrive() {
				return ctrl.Result{}, errors.New("members did not run concurrently")
			}
			mu.Lock()
			seen = append(seen, g)
			mu.Unlock()
			// Changes besides the member's own condition stay on its copy.
			g.Status.Endpoint = "http://" + name
			g.Spec.Region = name
			g.Labels = map[string]string{"member": name}
			pipeline.SetCondition(g, cond, metav1.ConditionTrue, "Fine", "")
			return ctrl.Result{}, nil
		}}
	}
	e := newEnv(t, primary, pipeline.Parallel(member("M1", condA), member("M2", condB), member("M3", condC)))
	g := e.get(t)
	if _, err := e.p.Run(context.Background(), g, &trace{}); err != nil {
		t.Fatal(err)
	}
	for i, s := range seen {
		if s == g {
			t.Errorf("a member got the primary object, want a copy")
		}
		for _, o := range seen[i+1:] {
			if s == o {
				t.Errorf("two members shared one copy")
			}
		}
	}
	if g.Status.Endpoint != "" || g.Spec.Region != "" || g.Labels != nil {
		t.Errorf("a member's non-condition change reached the primary: endpoint %q, region %q, labels %v",
			g.Status.Endpoint, g.Spec.Region, g.Labels)
	}
	wantCondition(t, g, ready, metav1.ConditionTrue, pipeline.ReasonAllReady)
}

func TestParallelMergesARemovedCondition(t *testing.T) {
	stale := metav1.Condition{Type: "Retired", Status: "True", Reason: "Old", LastTransitionTime: metav1.Now()}
	retire := step{Name: "Retire", Condition: "Retired", Run: func(_ context.Context, g glance, _ pass) (ctrl.Result, error) {
		meta.RemoveStatusCondition(&g.Status.Conditions, "Retired")
		return ctrl.Result{}, nil
	}}
	e := newEnv(t, newGlance(stale), pipeline.Parallel(retire, ok("Other", condA)))
	g, _, _, err := e.run(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, stored := range []*v1alpha1.Glance{g, e.get(t)} {
		if c := meta.FindStatusCondition(stored.Status.Conditions, "Retired"); c != nil {
			t.Errorf("the member removed its condition but the primary kept %+v", c)
		}
		wantCondition(t, stored, condA, metav1.ConditionTrue, "Fine")
	}
}

func TestParallelFirstErrorInMemberOrderWins(t *testing.T) {
	err1, err2 := errors.New("first member"), errors.New("second member")
	secondDone := make(chan struct{})
	// The first member fails only after the second has failed, so "first"
	// means member order, not completion order.
	first := step{Name: "M1", Condition: condA, Run: func(_ context.Context, g glance, tr pass) (ctrl.Result, error) {
		select {
		case <-secondDone:
		case <-time.After(30 * time.Second):
			t.Error("second member never finished")
		}
		return ctrl.Result{}, err1
	}}
	second := step{Name: "M2", Condition: condB, Run: func(_ context.Context, g glance, tr pass) (ctrl.Result, error) {
		defer close(secondDone)
		return ctrl.Result{RequeueAfter: time.Second}, err2
	}}
	e := newEnv(t, newGlance(), pipeline.Parallel(first, second, requeue("M3", condC, time.Second)))
	_, _, res, err := e.run(t)
	if !errors.Is(err, err1) || errors.Is(err, err2) {
		t.Fatalf("Run error = %v, want only the first member's", err)
	}
	if !res.IsZero() {
		t.Errorf("Run result = %+v with an error, want zero", res)
	}
	// Every failing member is counted, not only the winner.
	for _, m := range []struct{ name, cond string }{{"M1", condA}, {"M2", condB}} {
		if v := counterValue(t, e.reg, "glance_operator_reconcile_errors_total",
			map[string]string{"sub_reconciler": m.name, "condition_type": m.cond}); v != 1 {
			t.Errorf("errors_total{%s} = %v, want 1", m.name, v)
		}
	}
}

func TestParallelShortestRequeue(t *testing.T) {
	requeueOnly := func(name string) step {
		return step{Name: name, Condition: name, Run: func(context.Context, glance, pass) (ctrl.Result, error) {
			return ctrl.Result{Requeue: true}, nil
		}}
	}
	for _, tc := range []struct {
		name    string
		members []step
		want    ctrl.Result
	}{
		{"shortest delay", []step{
			requeue("M1", condA, 30*time.Second), requeue("M2", condB, 10*time.Second),
			ok("M3", condC), requeue("M4", "D", 15*time.Second),
		}, ctrl.Result{RequeueAfter: 10 * time.Second}},
		{"a delay wins over a bare requeue", []step{
			requeueOnly("M1"), requeue("M2", condB, 20*time.Second),
		}, ctrl.Result{RequeueAfter: 20 * time.Second}},
		{"a bare requeue when nobody asked for a delay", []step{
			ok("M1", condA), requeueOnly("M2"),
		}, ctrl.Result{Requeue: true}},
		{"all done", []step{ok("M1", condA), ok("M2", condB)}, ctrl.Result{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, newGlance(), pipeline.Parallel(tc.members...), pipeline.Single(ok("After", "AfterReady")))
			_, tr, res, err := e.run(t)
			if err != nil {
				t.Fatal(err)
			}
			if res != tc.want {
				t.Errorf("Run result = %+v, want %+v", res, tc.want)
			}
			if ranAfter := slices.Contains(tr.steps(), "After"); ranAfter != tc.want.IsZero() {
				t.Errorf("stage after the group ran = %v, want %v", ranAfter, tc.want.IsZero())
			}
		})
	}
}

func TestPanicRecovery(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stages func() []stage
	}{
		{"step", func() []stage {
			return []stage{pipeline.Single(ok("First", condA)), pipeline.Single(panicking("Boom", condB)), pipeline.Single(ok("Third", condC))}
		}},
		{"group member", func() []stage {
			return []stage{
				pipeline.Single(ok("First", condA)),
				pipeline.Parallel(ok("Sibling", condC), panicking("Boom", condB)),
				pipeline.Single(ok("Third", "ThirdReady")),
			}
		}},
		{"call run concurrently", func() []stage {
			return []stage{pipeline.Single(ok("First", condA)), pipeline.Single(panickingConcurrently("Boom", condB)), pipeline.Single(ok("Third", condC))}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, newGlance(), tc.stages()...)
			logs := &logSink{}
			g := e.get(t)
			tr := &trace{}
			_, err := e.p.Run(logs.context(context.Background()), g, tr)

			if !errors.Is(err, pipeline.ErrStepPanicked) || !strings.Contains(err.Error(), "Boom") {
				t.Fatalf("Run error = %v, want a panic error naming step Boom", err)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error %q quotes the panic value", err)
			}
			if slices.Contains(tr.steps(), "Third") {
				t.Errorf("ran %v: the pass went on after the panic", tr.steps())
			}
			stored := e.get(t)
			c := wantCondition(t, stored, condB, metav1.ConditionFalse, pipeline.ReasonInternalError)
			if !strings.Contains(c.Message, "Boom failed unexpectedly") || !strings.Contains(c.Message, "operator log") ||
				strings.Contains(c.Message, "s3cr3t") {
				t.Errorf("condition message %q: want the step name and a pointer to the log, never the panic value", c.Message)
			}
			wantCondition(t, stored, condA, metav1.ConditionTrue, "Fine")
			if tc.name == "group member" {
				wantCondition(t, stored, condC, metav1.ConditionTrue, "Fine")
			}
			wantCondition(t, stored, ready, metav1.ConditionFalse, pipeline.ReasonNotAllReady)
			if v := counterValue(t, e.reg, "glance_operator_reconcile_errors_total",
				map[string]string{"sub_reconciler": "Boom", "condition_type": condB}); v != 1 {
				t.Errorf("errors_total{Boom} = %v, want 1", v)
			}
			if n := histogramCount(t, e.reg, "glance_operator_reconcile_duration_seconds", map[string]string{"sub_reconciler": "Boom"}); n != 1 {
				t.Errorf("duration{Boom} count = %d, want 1", n)
			}
			if out := logs.String(); !strings.Contains(out, "s3cr3t-value") || !strings.Contains(out, "goroutine") || !strings.Contains(out, `"step"="Boom"`) {
				t.Errorf("log lacks the panic value, the stack or the step:\n%s", out)
			}
		})
	}
}

// Concurrently's calls run at once, and their errors come back joined in
// the order of the calls.
func TestConcurrently(t *testing.T) {
	together := newBarrier(3)
	first, third := errors.New("first"), errors.New("third")
	call := func(err error) func() error {
		return func() error {
			if !together.arrive() {
				return errors.New("the calls did not run at once")
			}
			return err
		}
	}
	err := pipeline.Concurrently(call(first), call(nil), call(third))
	if err == nil || err.Error() != "first\nthird" || !errors.Is(err, first) || !errors.Is(err, third) {
		t.Fatalf("Concurrently = %v; want first and third, in that order", err)
	}
	if err := pipeline.Concurrently(); err != nil {
		t.Fatalf("Concurrently() = %v, want nil", err)
	}
}

// preset is a condition a Glance holds as a pass starts.
func preset(typ string, s metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: typ, Status: s, Reason: "Preset", LastTransitionTime: metav1.Now()}
}

func TestReadyAggregation(t *testing.T) {
	cond := preset
	for _, tc := range []struct {
		name        string
		preset      []metav1.Condition
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
		wantDone    int
	}{
		{"all True", []metav1.Condition{cond(condC, "True"), cond(condA, "True"), cond(condB, "True")},
			metav1.ConditionTrue, pipeline.ReasonAllReady, "All sub-conditions are True.", 3},
		{"one False", []metav1.Condition{cond(condA, "True"), cond(condB, "False"), cond(condC, "True")},
			metav1.ConditionFalse, pipeline.ReasonNotAllReady, "BReady: Preset.", 2},
		{"one Unknown", []metav1.Condition{cond(condA, "True"), cond(condB, "True"), cond(condC, "Unknown")},
			metav1.ConditionFalse, pipeline.ReasonNotAllReady, "CReady: Preset.", 2},
		{"one missing", []metav1.Condition{cond(condA, "True"), cond(condC, "True")},
			metav1.ConditionFalse, pipeline.ReasonNotAllReady, "BReady: not evaluated yet.", 2},
		{"several, in SubConditions order", []metav1.Condition{cond(condC, "False"), cond(condB, "True")},
			metav1.ConditionFalse, pipeline.ReasonNotAllReady, "AReady: not evaluated yet; CReady: Preset.", 1},
		{"a stale True Ready is recomputed", []metav1.Condition{cond(ready, "True"), cond(condA, "True")},
			metav1.ConditionFalse, pipeline.ReasonNotAllReady, "BReady: not evaluated yet; CReady: not evaluated yet.", 1},
		{"unrelated conditions do not count", []metav1.Condition{cond(condA, "True"), cond(condB, "True"), cond(condC, "True"), cond("Other", "False")},
			metav1.ConditionTrue, pipeline.ReasonAllReady, "All sub-conditions are True.", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, newGlance(tc.preset...))
			g, _, _, err := e.run(t)
			if err != nil {
				t.Fatal(err)
			}
			for _, stored := range []*v1alpha1.Glance{g, e.get(t)} {
				c := wantCondition(t, stored, ready, tc.wantStatus, tc.wantReason)
				if c.Message != tc.wantMessage {
					t.Errorf("Ready message %q, want %q", c.Message, tc.wantMessage)
				}
			}
			if done := e.p.Done(g); done != tc.wantDone {
				t.Errorf("Done = %d, want %d", done, tc.wantDone)
			}
			// Stored in pipeline order, whatever order they were set in:
			// the aggregate, the sub-conditions, then any other.
			var want, got []string
			for _, typ := range append([]string{ready}, e.p.SubConditions...) {
				if meta.FindStatusCondition(g.Status.Conditions, typ) != nil {
					want = append(want, typ)
				}
			}
			for _, c := range tc.preset {
				if c.Type != ready && !slices.Contains(e.p.SubConditions, c.Type) {
					want = append(want, c.Type)
				}
			}
			for _, c := range e.get(t).Status.Conditions {
				got = append(got, c.Type)
			}
			if !slices.Equal(got, want) {
				t.Errorf("conditions stored in the order %v, want %v", got, want)
			}
		})
	}
	if pipeline.ReasonAllReady != v1alpha1.ReasonAllReady || pipeline.ReasonNotAllReady != v1alpha1.ReasonNotAllReady {
		t.Error("the pipeline's aggregate reasons differ from the API's")
	}
}

// TestFailedPassIsNeverReady: a step that failed before it could set its
// condition leaves it False with its failure reason and the error, never the
// stale True, so Ready (the AND of the sub-conditions) is False.
func TestFailedPassIsNeverReady(t *testing.T) {
	cond := func(typ string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: "True", Reason: "Preset", LastTransitionTime: metav1.Now()}
	}
	for _, tc := range []struct {
		name, failureReason, wantReason string
		err                             error
		wantMessage                     string
	}{
		{"named reason", "Broken", "Broken", errors.New("the API server went away"), "the API server went away"},
		{"default reason", "", pipeline.ReasonStepFailed, errors.New("the API server went away"), "the API server went away"},
		{"terminal error reads as what it wraps", "Broken", "Broken",
			reconcile.TerminalError(errors.New(`ConfigMap "x" is invalid: Too long`)), `ConfigMap "x" is invalid: Too long`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, newGlance(cond(condA), cond(condB), cond(condC)),
				pipeline.Single(step{Name: "Fails", Condition: condA, FailureReason: tc.failureReason,
					Run: func(context.Context, *v1alpha1.Glance, *trace) (ctrl.Result, error) {
						return ctrl.Result{}, tc.err
					}}))
			g, _, _, err := e.run(t)
			if err == nil {
				t.Fatal("the failing step's error was not returned")
			}
			for _, stored := range []*v1alpha1.Glance{g, e.get(t)} {
				c := wantCondition(t, stored, condA, metav1.ConditionFalse, tc.wantReason)
				if c.Message != tc.wantMessage || c.ObservedGeneration != 3 {
					t.Errorf("AReady message %q at generation %d, want %q at 3", c.Message, c.ObservedGeneration, tc.wantMessage)
				}
				if c := wantCondition(t, stored, ready, metav1.ConditionFalse, pipeline.ReasonNotAllReady); c.Message != "AReady: "+tc.wantReason+"." {
					t.Errorf("Ready message %q", c.Message)
				}
			}
		})
	}
}

// TestFailedStepConditionRule: on an error the step's own False stands; a
// True it set, or one it did not touch, becomes False with its failure
// reason; without an error an untouched condition is kept as it was.
func TestFailedStepConditionRule(t *testing.T) {
	boom := errors.New("boom")
	old := metav1.Condition{Type: condA, Status: "False", Reason: "OldWait", Message: "old", ObservedGeneration: 2, LastTransitionTime: metav1.Now()}
	for _, tc := range []struct {
		name        string
		run         func(g *v1alpha1.Glance) error
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
		wantGen     int64
	}{
		{"own False stands", func(g *v1alpha1.Glance) error {
			pipeline.SetCondition(g, condA, metav1.ConditionFalse, "ExpandFailed", "the expand Job failed")
			return boom
		}, metav1.ConditionFalse, "ExpandFailed", "the expand Job failed", 3},
		{"own True is overridden", func(g *v1alpha1.Glance) error {
			pipeline.SetCondition(g, condA, metav1.ConditionTrue, "Fine", "")
			return boom
		}, metav1.ConditionFalse, "Broken", "boom", 3},
		{"an old False is not left standing", func(*v1alpha1.Glance) error { return boom },
			metav1.ConditionFalse, "Broken", "boom", 3},
		{"untouched without an error keeps its generation", func(*v1alpha1.Glance) error { return nil },
			metav1.ConditionFalse, "OldWait", "old", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, newGlance(old), pipeline.Single(step{Name: "A", Condition: condA, FailureReason: "Broken",
				Run: func(_ context.Context, g *v1alpha1.Glance, _ *trace) (ctrl.Result, error) {
					return ctrl.Result{}, tc.run(g)
				}}))
			g, _, _, _ := e.run(t)
			for _, stored := range []*v1alpha1.Glance{g, e.get(t)} {
				c := wantCondition(t, stored, condA, tc.wantStatus, tc.wantReason)
				if c.Message != tc.wantMessage || c.ObservedGeneration != tc.wantGen {
					t.Errorf("AReady %q at generation %d, want %q at %d", c.Message, c.ObservedGeneration, tc.wantMessage, tc.wantGen)
				}
			}
		})
	}
}

// TestObservedGenerationPerCondition: a condition says the generation it was
// evaluated against; one the pass did not reach keeps its own.
func TestObservedGenerationPerCondition(t *testing.T) {
	old := metav1.Condition{Type: condC, Status: "True", Reason: "Old", ObservedGeneration: 1, LastTransitionTime: metav1.Now()}
	primary := newGlance(old)
	primary.Generation = 7
	primary.Status.ObservedGeneration = 6
	e := newEnv(t, primary, pipeline.Single(ok("First", condA)), pipeline.Single(requeue("Stop", condB, time.Second)),
		pipeline.Single(ok("NotReached", condC)))
	if _, _, _, err := e.run(t); err != nil {
		t.Fatal(err)
	}
	stored := e.get(t)
	if stored.Status.ObservedGeneration != 7 {
		t.Errorf("status.observedGeneration = %d, want 7", stored.Status.ObservedGeneration)
	}
	want := map[string]int64{condA: 7, condB: 7, condC: 1, ready: 7}
	if len(stored.Status.Conditions) != len(want) {
		t.Errorf("conditions %+v, want AReady, BReady, CReady, Ready", stored.Status.Conditions)
	}
	for _, c := range stored.Status.Conditions {
		if c.ObservedGeneration != want[c.Type] {
			t.Errorf("condition %s observedGeneration = %d, want %d", c.Type, c.ObservedGeneration, want[c.Type])
		}
	}
}

// TestAfterStatusWrite: what a step defers runs once the status is stored,
// members' included, and not at all when the write fails.
func TestAfterStatusWrite(t *testing.T) {
	deferring := func(name, cond string, ran *[]string, mu *sync.Mutex) step {
		return step{Name: name, Condition: cond, Run: func(ctx context.Context, g glance, _ pass) (ctrl.Result, error) {
			pipeline.SetCondition(g, cond, metav1.ConditionTrue, "Fine", name)
			pipeline.AfterStatusWrite(ctx, func() {
				mu.Lock()
				*ran = append(*ran, name)
				mu.Unlock()
			})
			return ctrl.Result{}, nil
		}}
	}
	for _, tc := range []struct {
		name      string
		failWrite error
		want      int
	}{
		{"written", nil, 3},
		{"write failed", errors.New("apiserver unavailable"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var ran []string
			e := newEnv(t, newGlance(), pipeline.Single(deferring("A", condA, &ran, &mu)),
				pipeline.Parallel(deferring("B", condB, &ran, &mu), deferring("C", condC, &ran, &mu)))
			e.writes.failStatus = tc.failWrite
			_, _, _, err := e.run(t)
			if (err != nil) != (tc.failWrite != nil) {
				t.Fatalf("Run error = %v", err)
			}
			if len(ran) != tc.want {
				t.Errorf("deferred functions ran %v, want %d of them", ran, tc.want)
			}
		})
	}
	var called bool
	pipeline.AfterStatusWrite(context.Background(), func() { called = true })
	if !called {
		t.Error("outside a pipeline run, AfterStatusWrite did not run the function at once")
	}
}

// TestParallelMergeStatus: a member's own status fields reach the primary
// through MergeStatus; without it they stay on the copy.
func TestParallelMergeStatus(t *testing.T) {
	setEndpoint := func(name, cond, endpoint string, merge func(dst, src glance)) step {
		return step{Name: name, Condition: cond, MergeStatus: merge, Run: func(_ context.Context, g glance, _ pass) (ctrl.Result, error) {
			g.Status.Endpoint = endpoint
			pipeline.SetCondition(g, cond, metav1.ConditionTrue, "Fine", "")
			return ctrl.Result{}, nil
		}}
	}
	e := newEnv(t, newGlance(), pipeline.Parallel(
		setEndpoint("Owner", condA, "http://owner", func(dst, src glance) { dst.Status.Endpoint = src.Status.Endpoint }),
		setEndpoint("Other", condB, "http://other", nil)))
	g, _, _, err := e.run(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, stored := range []*v1alpha1.Glance{g, e.get(t)} {
		if stored.Status.Endpoint != "http://owner" {
			t.Errorf("status.endpoint %q, want the owner's", stored.Status.Endpoint)
		}
	}
}

func TestStatusWrittenOnlyWhenChanged(t *testing.T) {
	e := newEnv(t, newGlance(), pipeline.Single(ok("A", condA)), pipeline.Single(ok("B", condB)), pipeline.Parallel(ok("C", condC)))

	if _, _, _, err := e.run(t); err != nil {
		t.Fatal(err)
	}
	patches := e.writes.statusPatches()
	if len(patches) != 1 || e.writes.count() != 1 {
		t.Fatalf("first pass: %d status writes, %d writes in all; want exactly one status write", len(patches), e.writes.count())
	}
	p := patches[0]
	if p.subResource != "status" || p.patchType != "application/merge-patch+json" {
		t.Errorf("status write is a %s patch of %q, want a merge patch of the status subresource", p.patchType, p.subResource)
	}
	if len(p.body) != 1 || p.body["status"] == nil {
		t.Errorf("status patch body %v, want only a status field (no metadata, no spec)", p.body)
	}

	// A second pass over the stored object (and over the same in-memory
	// object) changes nothing and writes nothing.
	g, _, _, err := e.run(t)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.Run(context.Background(), g, &trace{}); err != nil {
		t.Fatal(err)
	}
	if n := e.writes.count(); n != 1 {
		t.Errorf("%d writes after two no-op passes, want still 1", n)
	}
	wantCondition(t, e.get(t), ready, metav1.ConditionTrue, pipeline.ReasonAllReady)
}

func TestStatusPatchClearsRemovedFields(t *testing.T) {
	primary := newGlance()
	primary.Status.Endpoint = "http://glance.openstack.svc:9292"
	clearEndpoint := step{Name: "Deployment", Condition: condA, Run: func(_ context.Context, g glance, _ pass) (ctrl.Result, error) {
		g.Status.Endpoint = ""
		pipeline.SetCondition(g, condA, metav1.ConditionFalse, "WaitingForDeployment", "")
		return ctrl.Result{}, nil
	}}
	e := newEnv(t, primary, pipeline.Single(clearEndpoint))
	if _, _, _, err := e.run(t); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t).Status.Endpoint; got != "" {
		t.Errorf("stored endpoint %q after the step cleared it, want empty", got)
	}
}

func TestLastTransitionTime(t *testing.T) {
	past := metav1.NewTime(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC))
	preset := func() []metav1.Condition {
		return []metav1.Condition{
			{Type: condA, Status: "True", Reason: "Fine", Message: "old message", LastTransitionTime: past, ObservedGeneration: 3},
			{Type: condB, Status: "True", Reason: "Fine", LastTransitionTime: past, ObservedGeneration: 3},
			{Type: ready, Status: "False", Reason: pipeline.ReasonNotAllReady, Message: "Not True: CReady.", LastTransitionTime: past, ObservedGeneration: 3},
		}
	}
	e := newEnv(t, newGlance(preset()...),
		pipeline.Single(ok("A", condA)),      // same status, new message
		pipeline.Single(waiting("B", condB)), // status flips
	)
	g, _, _, err := e.run(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, stored := range []*v1alpha1.Glance{g, e.get(t)} {
		a := condition(t, stored, condA)
		if !a.LastTransitionTime.Equal(&past) || a.Message != "A is fine." {
			t.Errorf("AReady: %s at %v; want the new message with the old transition time %v", a.Message, a.LastTransitionTime, past)
		}
		if b := condition(t, stored, condB); b.LastTransitionTime.Equal(&past) {
			t.Errorf("BReady flipped to False but kept transition time %v", past)
		}
		if r := condition(t, stored, ready); !r.LastTransitionTime.Equal(&past) {
			t.Errorf("Ready stayed False but its transition time moved to %v", r.LastTransitionTime)
		}
	}
}

// TestSharedConditionSettledOncePerPass: one step sets a shared condition
// True and a later one sets it False again, as the Secrets and Config steps
// do with SecretsReady: a steady False keeps its transition time, and a pass
// that ends as the last one did writes nothing.
func TestSharedConditionSettledOncePerPass(t *testing.T) {
	past := metav1.NewTime(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC))
	g := newGlance(
		metav1.Condition{Type: condA, Status: "False", Reason: "Waiting", Message: "A2 waits.", LastTransitionTime: past, ObservedGeneration: 3},
		metav1.Condition{Type: ready, Status: "False", Reason: pipeline.ReasonNotAllReady, Message: "Not True: AReady.", LastTransitionTime: past, ObservedGeneration: 3},
	)
	g.Status.ObservedGeneration = 3
	e := newEnv(t, g, pipeline.Single(ok("A1", condA)), pipeline.Single(waiting("A2", condA)))
	writes := 0
	for pass := range 3 {
		g, _, _, err := e.run(t)
		if err != nil {
			t.Fatal(err)
		}
		if a := condition(t, g, condA); !a.LastTransitionTime.Equal(&past) {
			t.Errorf("pass %d: AReady stayed False but its transition time moved to %v", pass, a.LastTransitionTime)
		}
		if pass == 0 {
			// The first pass may settle the Ready message.
			writes = e.writes.count()
		}
	}
	if n := e.writes.count() - writes; n != 0 {
		t.Errorf("%d writes for passes that changed nothing, want none", n)
	}
}

// TestStepFailedOncePerCause: StepFailed hears a step error when it gives
// the condition the step's FailureReason anew, not again while the cause
// stays.
func TestStepFailedOncePerCause(t *testing.T) {
	refused := step{Name: "A", Condition: condA, FailureReason: "Refused", Run: func(context.Context, glance, pass) (ctrl.Result, error) {
		return ctrl.Result{}, errors.New("refused")
	}}
	e := newEnv(t, newGlance(), pipeline.Single(refused), pipeline.Single(failing("B", condB, errors.New("sets its own"))))
	var heard []string
	e.p.StepFailed = func(_ context.Context, _ glance, _ pass, s step, reason, message string) {
		heard = append(heard, s.Name+" "+reason+" "+message)
	}
	for range 3 {
		if _, _, _, err := e.run(t); err == nil {
			t.Fatal("the failing step's pass returned no error")
		}
	}
	// B set its own False: it reports it itself.
	if want := []string{"A Refused refused"}; !slices.Equal(heard, want) {
		t.Errorf("StepFailed heard %q, want %q", heard, want)
	}
}

// TestStepFailedOncePerCauseOnASharedCondition: an earlier step of the
// pass sets the shared condition True before a later one fails on it, as
// the Secrets and Config steps do with SecretsReady. The failure is measured
// against the condition as stored when the pass began, so it is heard once
// while it persists, and again when its message changes: another cause.
func TestStepFailedOncePerCauseOnASharedCondition(t *testing.T) {
	cause := "the ConfigMap is too long"
	refused := step{Name: "A2", Condition: condA, FailureReason: "Refused", Run: func(context.Context, glance, pass) (ctrl.Result, error) {
		return ctrl.Result{}, errors.New(cause)
	}}
	e := newEnv(t, newGlance(), pipeline.Single(ok("A1", condA)), pipeline.Single(refused))
	var heard []string
	e.p.StepFailed = func(_ context.Context, _ glance, _ pass, s step, reason, message string) {
		heard = append(heard, s.Name+" "+reason+": "+message)
	}
	passes := func(n int) {
		t.Helper()
		for range n {
			if _, _, _, err := e.run(t); err == nil {
				t.Fatal("the failing step's pass returned no error")
			}
		}
	}
	passes(3)
	want := []string{"A2 Refused: the ConfigMap is too long"}
	if !slices.Equal(heard, want) {
		t.Errorf("StepFailed heard %q over 3 passes of one cause, want %q", heard, want)
	}
	cause = "the ConfigMap is invalid"
	passes(2)
	want = append(want, "A2 Refused: the ConfigMap is invalid")
	if !slices.Equal(heard, want) {
		t.Errorf("StepFailed heard %q after the message changed, want %q", heard, want)
	}
}

func TestRunErrorAndStatusWriteErrorAreJoined(t *testing.T) {
	errStep := errors.New("step failed")
	errWrite := errors.New("apiserver unavailable")
	e := newEnv(t, newGlance(), pipeline.Single(failing("A", condA, errStep)))
	e.writes.failStatus = errWrite
	_, _, res, err := e.run(t)
	if !errors.Is(err, errStep) || !errors.Is(err, errWrite) {
		t.Fatalf("Run error = %v, want both the step error and the status-write error", err)
	}
	if !res.IsZero() {
		t.Errorf("Run result = %+v, want zero with an error", res)
	}

	// A status-write error alone fails the pass too.
	e = newEnv(t, newGlance(), pipeline.Single(requeue("A", condA, time.Minute)))
	e.writes.failStatus = errWrite
	if _, _, _, err := e.run(t); !errors.Is(err, errWrite) {
		t.Fatalf("Run error = %v, want the status-write error", err)
	}
}

func TestMetricsPerStepAndMember(t *testing.T) {
	errB := errors.New("b")
	e := newEnv(t, newGlance(),
		pipeline.Single(ok("Secrets", condA)),
		pipeline.Single(ok("Config", condA)),
		pipeline.Parallel(ok("HPA", condB), failing("HTTPRoute", condC, errB)))
	for range 2 {
		if _, _, _, err := e.run(t); !errors.Is(err, errB) {
			t.Fatalf("Run error = %v, want %v", err, errB)
		}
	}
	for _, name := range []string{"Secrets", "Config", "HPA", "HTTPRoute"} {
		if n := histogramCount(t, e.reg, "glance_operator_reconcile_duration_seconds", map[string]string{"sub_reconciler": name}); n != 2 {
			t.Errorf("duration{sub_reconciler=%s} count = %d, want 2", name, n)
		}
	}
	if v := counterValue(t, e.reg, "glance_operator_reconcile_errors_total",
		map[string]string{"sub_reconciler": "HTTPRoute", "condition_type": condC}); v != 2 {
		t.Errorf("errors_total{HTTPRoute,CReady} = %v, want 2", v)
	}
	for _, name := range []string{"Secrets", "Config", "HPA"} {
		if v := counterValue(t, e.reg, "glance_operator_reconcile_errors_total",
			map[string]string{"sub_reconciler": name, "condition_type": condA}); v > 0 {
			t.Errorf("errors_total{%s} = %v for a step that did not fail", name, v)
		}
	}
}

func TestRunWithoutMetrics(t *testing.T) {
	e := newEnv(t, newGlance(), pipeline.Single(panicking("Boom", condA)))
	e.p.Metrics = nil
	if _, _, _, err := e.run(t); !errors.Is(err, pipeline.ErrStepPanicked) {
		t.Fatalf("Run error = %v, want the recovered panic", err)
	}
}

func TestSetCondition(t *testing.T) {
	g := newGlance()
	g.Generation = 4
	pipeline.SetCondition(g, condA, metav1.ConditionFalse, "Waiting", "first")
	first := condition(t, g, condA)
	if first.ObservedGeneration != 4 || first.LastTransitionTime.IsZero() || first.Message != "first" {
		t.Errorf("condition %+v, want generation 4, a transition time and the message", first)
	}
	past := metav1.NewTime(first.LastTransitionTime.Add(-time.Hour))
	g.Status.Conditions[0].LastTransitionTime = past
	pipeline.SetCondition(g, condA, metav1.ConditionFalse, "StillWaiting", "second")
	if c := condition(t, g, condA); !c.LastTransitionTime.Equal(&past) || c.Reason != "StillWaiting" {
		t.Errorf("same status: %+v, want the new reason and the old transition time", c)
	}
	pipeline.SetCondition(g, condA, metav1.ConditionTrue, "Fine", "")
	if c := condition(t, g, condA); c.LastTransitionTime.Equal(&past) {
		t.Errorf("status flip kept the old transition time")
	}
	if len(g.Status.Conditions) != 1 {
		t.Errorf("conditions %+v, want one", g.Status.Conditions)
	}
}

// TestSetConditionBoundsTheMessage: a message longer than the API allows is
// cut on a character boundary, so the status write cannot fail on it.
func TestSetConditionBoundsTheMessage(t *testing.T) {
	g := newGlance()
	pipeline.SetCondition(g, condA, metav1.ConditionFalse, "Refused", strings.Repeat("ä", 20000))
	c := condition(t, g, condA)
	if len(c.Message) > 32768 || !utf8.ValidString(c.Message) || !strings.HasSuffix(c.Message, "…") {
		t.Errorf("message of %d bytes (valid UTF-8: %v), want at most 32768 ending in …", len(c.Message), utf8.ValidString(c.Message))
	}
	pipeline.SetCondition(g, condA, metav1.ConditionFalse, "Refused", "short")
	if c := condition(t, g, condA); c.Message != "short" {
		t.Errorf("short message became %q", c.Message)
	}
}

func TestProgress(t *testing.T) {
	var p pipeline.Progress
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	if got := p.Of(a); got != 0 {
		t.Fatalf("Of an unrecorded key = %d, want 0", got)
	}
	p.Record(a, 4)
	p.Record(b, 7)
	p.Record(a, 2)
	if got, gotB := p.Of(a), p.Of(b); got != 2 || gotB != 7 {
		t.Fatalf("Of = %d, %d; want the last recorded, 2 and 7", got, gotB)
	}
	p.Forget(a)
	if got := p.Of(a); got != 0 {
		t.Fatalf("Of a forgotten key = %d, want 0", got)
	}
}

// TestHoldKeepsTheAggregatesStatus: a held pipeline gives the aggregate the
// hold's reason and message and keeps its status, whatever the
// sub-conditions say; Stored hears the pass before and as stored, and only
// when the status is stored.
func TestHoldKeepsTheAggregatesStatus(t *testing.T) {
	cond := preset
	for _, tc := range []struct {
		name   string
		preset []metav1.Condition
		want   metav1.ConditionStatus
	}{
		{"True stays True with a False sub-condition", []metav1.Condition{cond(ready, "True"), cond(condA, "False")}, metav1.ConditionTrue},
		{"False stays False with every sub-condition True", []metav1.Condition{cond(ready, "False"), cond(condA, "True"), cond(condB, "True"), cond(condC, "True")}, metav1.ConditionFalse},
		{"none is Unknown", nil, metav1.ConditionUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, newGlance(tc.preset...))
			e.p.Hold = &pipeline.Hold{Reason: "Held", Message: "held on purpose"}
			var heard [][2]string
			e.p.Stored = func(_ context.Context, before, after glance) {
				reason := func(g glance) string {
					if c := meta.FindStatusCondition(g.Status.Conditions, ready); c != nil {
						return c.Reason
					}
					return ""
				}
				heard = append(heard, [2]string{reason(before), reason(after)})
			}
			if _, _, _, err := e.run(t); err != nil {
				t.Fatal(err)
			}
			c := wantCondition(t, e.get(t), ready, tc.want, "Held")
			if c.Message != "held on purpose" {
				t.Errorf("Ready message %q", c.Message)
			}
			before := ""
			if len(tc.preset) > 0 {
				before = "Preset"
			}
			if want := [][2]string{{before, "Held"}}; !slices.Equal(heard, want) {
				t.Errorf("Stored heard %v, want %v", heard, want)
			}
			// A second pass changes nothing and is heard as stored.
			if _, _, _, err := e.run(t); err != nil {
				t.Fatal(err)
			}
			if len(heard) != 2 || heard[1] != [2]string{"Held", "Held"} {
				t.Errorf("Stored heard %v after an unchanged pass", heard)
			}
		})
	}
}
