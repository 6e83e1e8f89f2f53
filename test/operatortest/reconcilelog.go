package operatortest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Outcomes of a reconcile, as controller-runtime logs them.
const (
	// OutcomeRequeueAfter: the reconcile returned RequeueAfter (Pass.After).
	OutcomeRequeueAfter = "RequeueAfter"
	// OutcomeDone: an empty result; nothing brings the object back but an
	// event.
	OutcomeDone = "Done"
	// OutcomeRequeue: a bare Requeue, retried with backoff.
	OutcomeRequeue = "Requeue"
	// OutcomeError: an error, retried with backoff unless terminal.
	OutcomeError = "Error"
)

// Pass is one reconcile of one object by one controller.
type Pass struct {
	Controller string
	Key        types.NamespacedName
	ID         string
	Started    time.Time
	Ended      time.Time // zero while it runs
	Outcome    string
	After      time.Duration
}

func (p Pass) String() string {
	out := p.Outcome
	if p.Outcome == OutcomeRequeueAfter {
		out += "(" + p.After.String() + ")"
	}
	if p.Ended.IsZero() {
		out = "running"
	}
	return p.Started.Format("15:04:05.000") + " " + out
}

// ReconcileLog is every reconcile of the process's controllers, read from
// the log lines controller-runtime writes at the start and the end of each
// one (at verbosity 5): "Reconciling", then "Reconcile done, requeueing
// after <d>", "Reconcile successful", "Reconcile done, requeueing" or
// "Reconciler error". It is how a test reads the ctrl.Result the real
// controllers return against the real API server, whatever builds them.
type ReconcileLog struct {
	mu     sync.Mutex
	passes []*Pass
	byID   map[string]*Pass
}

var (
	reconcileLog     = &ReconcileLog{byID: map[string]*Pass{}}
	reconcileLogOnce sync.Once
)

// RecordReconciles makes controller-runtime's logger, process-wide, the
// ReconcileLog's, and returns it. controller-runtime takes a logger once per
// process, and drops to a null logger when none is set within 30 seconds of
// its first use: call it from TestMain or a package-level variable. The
// operator's other log lines are discarded, as they are when no logger is
// set.
func RecordReconciles() *ReconcileLog {
	reconcileLogOnce.Do(func() { ctrllog.SetLogger(logr.New(passSink{log: reconcileLog})) })
	return reconcileLog
}

// Passes are the reconciles of key by the controller ("glance",
// "glancebackend"), oldest first.
func (l *ReconcileLog) Passes(controller string, key types.NamespacedName) []Pass {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Pass
	for _, p := range l.passes {
		if p.Controller == controller && p.Key == key {
			out = append(out, *p)
		}
	}
	return out
}

func (l *ReconcileLog) observe(msg string, kvs []any) {
	var outcome string
	var after time.Duration
	switch {
	case msg == "Reconciling":
	case strings.HasPrefix(msg, "Reconcile done, requeueing after "):
		d, err := time.ParseDuration(strings.TrimPrefix(msg, "Reconcile done, requeueing after "))
		if err != nil {
			return
		}
		outcome, after = OutcomeRequeueAfter, d
	case msg == "Reconcile successful":
		outcome = OutcomeDone
	case msg == "Reconcile done, requeueing":
		outcome = OutcomeRequeue
	case msg == "Reconciler error":
		outcome = OutcomeError
	default:
		return
	}
	var controller, id string
	var key types.NamespacedName
	for i := 0; i+1 < len(kvs); i += 2 {
		k, _ := kvs[i].(string)
		v := fmt.Sprint(kvs[i+1])
		switch k {
		case "controller":
			controller = v
		case "namespace":
			key.Namespace = v
		case "name":
			key.Name = v
		case "reconcileID":
			id = v
		}
	}
	if controller == "" || id == "" {
		return
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.byID[id]
	if !ok {
		p = &Pass{Controller: controller, Key: key, ID: id, Started: now}
		l.byID[id] = p
		l.passes = append(l.passes, p)
	}
	if outcome != "" {
		p.Ended, p.Outcome, p.After = now, outcome, after
		delete(l.byID, id)
	}
}

// passSink is a logr.LogSink that feeds a ReconcileLog.
type passSink struct {
	log *ReconcileLog
	kvs []any
}

func (passSink) Init(logr.RuntimeInfo) {}
func (passSink) Enabled(int) bool      { return true }
func (s passSink) Info(_ int, msg string, kvs ...any) {
	s.log.observe(msg, slices.Concat(s.kvs, kvs))
}
func (s passSink) Error(_ error, msg string, kvs ...any) {
	s.log.observe(msg, slices.Concat(s.kvs, kvs))
}
func (s passSink) WithValues(kvs ...any) logr.LogSink {
	return passSink{log: s.log, kvs: slices.Concat(s.kvs, kvs)}
}
func (s passSink) WithName(string) logr.LogSink { return s }

// NextPasses wakes obj with a label change (a write every controller
// watching it sees, which changes nothing it renders) and returns the
// controller's reconciles of obj that ended after the wake-up, up to and
// including the first one that started after it. Call it once the object is
// in the state under test, with nothing else changing: every pass returned
// saw that state.
func (l *ReconcileLog) NextPasses(t testing.TB, cl client.Client, controller string, obj client.Object) []Pass {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKeyFromObject(obj)
	from := time.Now()
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{"operatortest.c5c3.io/nudge":"%d"}}}`, from.UnixNano())
	if err := cl.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("wake %s: %v", key, err)
	}
	var got []Pass
	Eventually(t, fmt.Sprintf("%s %s to reconcile after the wake-up at %s", controller, key, from.Format("15:04:05.000")), func() error {
		got = got[:0]
		all := l.Passes(controller, key)
		for _, p := range all {
			if p.Ended.IsZero() || p.Ended.Before(from) {
				continue
			}
			got = append(got, p)
			if !p.Started.Before(from) {
				return nil
			}
		}
		return fmt.Errorf("passes %v", all)
	}, Every(50*time.Millisecond))
	return got
}

// AwaitQuiet waits until the controller has had no reconcile of key for
// quiet, and returns the last one: what it asked for is the only periodic
// wake-up pending.
func (l *ReconcileLog) AwaitQuiet(t testing.TB, controller string, key types.NamespacedName, quiet time.Duration) Pass {
	t.Helper()
	var passes []Pass
	Eventually(t, fmt.Sprintf("%s %s to go quiet for %s", controller, key, quiet), func() error {
		passes = l.Passes(controller, key)
		if len(passes) == 0 {
			return errors.New("no reconcile yet")
		}
		if last := passes[len(passes)-1]; last.Ended.IsZero() || time.Since(last.Ended) <= quiet {
			return fmt.Errorf("passes %v", passes)
		}
		return nil
	}, Every(50*time.Millisecond))
	return passes[len(passes)-1]
}

// PassAfter waits until a reconcile of key by the controller that started
// after from has ended, and returns the first such.
func (l *ReconcileLog) PassAfter(t testing.TB, controller string, key types.NamespacedName, from time.Time, opts ...PollOption) Pass {
	t.Helper()
	var got Pass
	Eventually(t, fmt.Sprintf("a reconcile of %s %s that started after %s", controller, key, from.Format("15:04:05.000")), func() error {
		all := l.Passes(controller, key)
		for _, p := range all {
			if p.Started.After(from) && !p.Ended.IsZero() {
				got = p
				return nil
			}
		}
		return fmt.Errorf("passes %v", all)
	}, append([]PollOption{Every(50 * time.Millisecond)}, opts...)...)
	return got
}
