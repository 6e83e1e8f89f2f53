// Package pipeline runs a reconciler as a table of named steps over a custom
// resource with conditions, and owns everything around the steps that every
// reconciler would otherwise repeat: ordering and short-circuit, a parallel
// group on object copies, panic recovery, per-step metrics, and the status
// skeleton (aggregate condition, the kstatus conditions Reconciling and
// Stalled, observedGeneration, a status write only when the status changed).
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/c5c3/glance-operator/pkg/metrics"
)

// Object is a custom resource with conditions and an observed generation,
// such as *v1alpha1.Glance.
type Object interface {
	client.Object
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
	SetObservedGeneration(int64)
}

// StepFunc reconciles one aspect of obj. It reports through its own
// condition (SetCondition) and returns a non-zero result to end the pass and
// come back later, or an error.
//
// state carries what earlier steps resolved for later ones within one pass
// (digests, rendered names); sequential steps may write it.
type StepFunc[T Object, S any] func(ctx context.Context, obj T, state S) (ctrl.Result, error)

// Step is one named row of the pipeline table.
type Step[T Object, S any] struct {
	// Name is the sub_reconciler metric label and names the step in errors
	// and logs.
	Name string
	// Condition is the condition type the step reports: the condition_type
	// metric label, the condition a recovered panic is reported on, and the
	// condition a parallel member's outcome is merged back by.
	Condition string
	// FailureReason is the reason Condition gets, False with the error as
	// its message, when Run returns an error and leaves Condition True or
	// unset in this call: a step error never leaves a stale True, nor a stale
	// False that names an older state, behind. Empty means ReasonStepFailed.
	FailureReason string
	// MergeStatus copies the status fields this step owns, other than its
	// condition, from a parallel member's copy onto the primary object. Nil
	// for steps that own no other status field.
	MergeStatus func(dst, src T)
	Run         StepFunc[T, S]
}

// Hold is what a held aggregate says: see Pipeline.Hold.
type Hold struct {
	Reason, Message string
}

// Stage is one step, or a group of steps run concurrently (Parallel).
type Stage[T Object, S any] struct {
	steps    []Step[T, S]
	parallel bool
}

// Single is a stage of one step, run on the primary object.
func Single[T Object, S any](step Step[T, S]) Stage[T, S] {
	return Stage[T, S]{steps: []Step[T, S]{step}}
}

// Parallel is a stage whose steps run concurrently, each on its own deep
// copy of the object, so a member never sees a sibling's in-flight changes.
// Members share state as is and must treat it as read-only.
//
// When all members have finished, each member's condition (by its
// Condition type) is copied onto the primary object, whether or not a
// sibling failed, with the status fields its MergeStatus copies; other
// changes a member makes to its copy are discarded. The stage's outcome is the first error in member order, else
// the shortest positive RequeueAfter, else a bare Requeue if one asked.
//
// Steps never write the CR itself: its one write is the pass's status write.
func Parallel[T Object, S any](steps ...Step[T, S]) Stage[T, S] {
	return Stage[T, S]{steps: steps, parallel: true}
}

// Steps returns the steps of the stage, so a reconciler's tests can check its
// table against the documented one.
func (s Stage[T, S]) Steps() []Step[T, S] { return s.steps }

// IsParallel reports whether the stage is a parallel group.
func (s Stage[T, S]) IsParallel() bool { return s.parallel }

// ReasonInternalError is the reason of the condition of a step that panicked.
const ReasonInternalError = "InternalError"

// ReasonStepFailed is the reason of the condition of a failed step that
// names no FailureReason.
const ReasonStepFailed = "StepFailed"

// ErrStepPanicked is wrapped by the error a recovered step panic becomes.
var ErrStepPanicked = errors.New("panicked")

// Pipeline is the table of stages of one reconciler.
type Pipeline[T Object, S any] struct {
	Stages []Stage[T, S]
	// Aggregate is the condition type that summarizes SubConditions
	// ("Ready"). Empty disables the aggregate.
	Aggregate string
	// SubConditions are the condition types Aggregate requires True, in the
	// order the aggregate's message lists them.
	SubConditions []string
	// Metrics receives step durations and errors; nil disables them.
	Metrics *metrics.Reconcile
	// Status writes the status subresource, typically manager client's
	// Status().
	Status client.SubResourceWriter
	// Detail, when set, adds a few words to a not-True sub-condition's entry
	// in the aggregate's message, such as the attempt of a retried Job.
	Detail func(obj T, c metav1.Condition) string
	// Hold, when set, replaces the aggregate's recomputation: the aggregate
	// keeps its status (Unknown when it has none) and takes Hold's reason
	// and message. A table whose steps change nothing on purpose, such as
	// a paused object's, says so there. A held pass applies no spec, so it
	// stamps no observedGeneration and leaves Reconciling and Stalled as
	// they were: a spec change made during the hold reads as not yet
	// observed, as it is.
	Hold *Hold
	// Health, when set, has every pass that is not held keep the two
	// conditions kstatus judges a custom resource by (Flux's health checks,
	// cli-utils): Reconciling and Stalled. See Health.
	Health *Health
	// Stored, when set, hears each pass whose status is stored (written,
	// or unchanged) with the object as the pass received it and as stored:
	// a transition seen there is announced once.
	Stored func(ctx context.Context, before, after T)
	// StepFailed, when set, hears each step error that gives the step's
	// condition its FailureReason, with the reason and message, unless the
	// condition was stored with that reason and message when the pass
	// began: the reconciler announces it once per cause rather than once
	// per retry. The stored condition is the measure, not the one the step
	// started from, because an earlier step of the same pass may have set a
	// shared condition True on the way (a different message is a different
	// cause). A step that sets a False of its own reports it itself.
	StepFailed func(ctx context.Context, obj T, state S, step Step[T, S], reason, message string)
}

// Run runs the stages in order on obj until one returns a non-zero result
// or an error, then applies the status skeleton: it recomputes the
// aggregate and, with Health, Reconciling and Stalled, stamps
// observedGeneration on the status (unless held), and writes the status
// with a merge patch when it differs from obj's status as Run received it; a
// write refreshes obj from the server's response. It does so on every exit
// path, and returns the step error and the status-write error joined. With
// an error, the result is dropped: controller-runtime ignores it and retries
// with backoff anyway.
//
// A condition carries the generation it was last evaluated against: the
// conditions of steps the pass did not reach keep theirs.
//
// The functions steps registered with AfterStatusWrite run once the status
// is stored (written, or unchanged), and are dropped when the write fails.
func (p *Pipeline[T, S]) Run(ctx context.Context, obj T, state S) (ctrl.Result, error) {
	base := obj.DeepCopyObject().(T)
	deferred := &afterWrite{}
	result, runErr := p.runStages(context.WithValue(ctx, afterWriteKey{}, deferred), obj, base, state)
	keepTransitionTimes(obj, base)
	p.finishStatus(obj, runErr)
	writeErr := p.writeStatus(ctx, obj, base)
	if writeErr == nil {
		deferred.run()
		if p.Stored != nil {
			p.Stored(ctx, base, obj)
		}
	}
	if err := errors.Join(runErr, writeErr); err != nil {
		return ctrl.Result{}, err
	}
	return result, nil
}

type afterWriteKey struct{}

// afterWrite collects the functions to run once the status is stored;
// parallel members register concurrently.
type afterWrite struct {
	mu  sync.Mutex
	fns []func()
}

func (a *afterWrite) run() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, fn := range a.fns {
		fn()
	}
}

// AfterStatusWrite makes fn run once the pass's status is stored, and never
// if the status write fails. A step records in the status that it has
// counted or announced something, and counts or announces it here: so it
// happens at most once, even when the write fails and the next pass does it
// again. Outside Pipeline.Run, fn runs at once.
func AfterStatusWrite(ctx context.Context, fn func()) {
	a, ok := ctx.Value(afterWriteKey{}).(*afterWrite)
	if !ok {
		fn()
		return
	}
	a.mu.Lock()
	a.fns = append(a.fns, fn)
	a.mu.Unlock()
}

// runStages runs the stages on obj; base is obj as the pass received it,
// its status as stored.
func (p *Pipeline[T, S]) runStages(ctx context.Context, obj, base T, state S) (ctrl.Result, error) {
	for _, stage := range p.Stages {
		var result ctrl.Result
		var err error
		switch {
		case stage.parallel:
			result, err = p.runGroup(ctx, obj, base, state, stage.steps)
		case len(stage.steps) == 1:
			result, err = p.runStep(ctx, obj, base, state, stage.steps[0])
		}
		if err != nil || !result.IsZero() {
			return result, err
		}
	}
	return ctrl.Result{}, nil
}

// runStep runs one step on obj, timed and counted, turning a panic into an
// error and an InternalError condition.
func (p *Pipeline[T, S]) runStep(ctx context.Context, obj, base T, state S, step Step[T, S]) (result ctrl.Result, err error) {
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			// The panic value may quote data the step handled, so it goes to
			// the log only, never into the condition or the error.
			log.FromContext(ctx).Error(fmt.Errorf("%v", r), "Pipeline step panicked",
				"step", step.Name, "stack", string(debug.Stack()))
			if step.Condition != "" {
				SetCondition(obj, step.Condition, metav1.ConditionFalse, ReasonInternalError,
					fmt.Sprintf("Step %s failed unexpectedly; see the operator log.", step.Name))
			}
			result, err = ctrl.Result{}, &stepError{step: step.Name, condition: step.Condition, err: ErrStepPanicked}
		} else if err != nil {
			err = &stepError{step: step.Name, condition: step.Condition, err: err}
		}
		if p.Metrics != nil {
			p.Metrics.Duration.WithLabelValues(step.Name).Observe(time.Since(start).Seconds())
			if err != nil {
				p.Metrics.Errors.WithLabelValues(step.Name, step.Condition).Inc()
			}
		}
	}()
	if step.Condition == "" {
		return step.Run(ctx, obj, state)
	}
	stored := meta.FindStatusCondition(base.GetConditions(), step.Condition)
	prior := markUnset(obj, step.Condition)
	defer func() {
		if settle(obj, step, prior, err) && p.StepFailed != nil {
			c := meta.FindStatusCondition(obj.GetConditions(), step.Condition)
			if !sameCause(stored, c) {
				p.StepFailed(ctx, obj, state, step, c.Reason, c.Message)
			}
		}
	}()
	return step.Run(ctx, obj, state)
}

// sameCause says whether a step's failed condition c states what the
// condition stored held already: the same status, reason and message.
func sameCause(stored, c *metav1.Condition) bool {
	return stored != nil && stored.Status == c.Status && stored.Reason == c.Reason && stored.Message == c.Message
}

// stepError is a step's error, with the step and the condition it reports:
// a terminal one tells finishStatus which condition is stalled.
type stepError struct {
	step, condition string
	err             error
}

func (e *stepError) Error() string { return "step " + e.step + ": " + e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// unsetGeneration marks a step's condition while the step runs: SetCondition
// always stamps a real generation, so a mark still there afterwards means the
// step did not set its condition.
const unsetGeneration = -1

// markUnset marks obj's condition typ as not yet set by this step and returns
// the observedGeneration it had.
func markUnset(obj Object, typ string) int64 {
	conds := obj.GetConditions()
	c := meta.FindStatusCondition(conds, typ)
	if c == nil {
		return 0
	}
	prior := c.ObservedGeneration
	c.ObservedGeneration = unsetGeneration
	obj.SetConditions(conds)
	return prior
}

// settle ends a step's run on its condition: a failed step's condition is
// False with the step's FailureReason, unless the step set a False of its
// own; a condition the step did not set gets its observedGeneration back.
// failed says whether it gave the condition the FailureReason.
func settle[T Object, S any](obj T, step Step[T, S], prior int64, err error) (failed bool) {
	conds := obj.GetConditions()
	c := meta.FindStatusCondition(conds, step.Condition)
	unset := c == nil || c.ObservedGeneration == unsetGeneration
	if c != nil && c.ObservedGeneration == unsetGeneration {
		c.ObservedGeneration = prior
		obj.SetConditions(conds)
	}
	if err != nil && (unset || c.Status == metav1.ConditionTrue) {
		reason := step.FailureReason
		if reason == "" {
			reason = ReasonStepFailed
		}
		SetCondition(obj, step.Condition, metav1.ConditionFalse, reason, conditionMessage(err))
		return true
	}
	return false
}

// maxConditionMessage is the API's bound on a condition message.
const maxConditionMessage = 32768

// conditionMessage is err's text. A terminal error reads as the error it
// wraps: that it is not retried is the controller's business.
func conditionMessage(err error) string {
	if errors.Is(err, reconcile.TerminalError(nil)) && errors.Unwrap(err) != nil {
		err = errors.Unwrap(err)
	}
	return err.Error()
}

// truncateMessage cuts msg to what a condition message may hold, so that a
// long error never makes the status write fail.
func truncateMessage(msg string) string { return Truncate(msg, maxConditionMessage) }

// Truncate cuts text to at most limit bytes, on a character boundary, with
// "…" marking the cut: the API server refuses an object whose message or
// note is longer than its bound, and the object is lost.
func Truncate(text string, limit int) string {
	if len(text) <= limit {
		return text
	}
	text = text[:limit-len("…")]
	for !utf8.ValidString(text) {
		text = text[:len(text)-1]
	}
	return text + "…"
}

func (p *Pipeline[T, S]) runGroup(ctx context.Context, obj, base T, state S, steps []Step[T, S]) (ctrl.Result, error) {
	type outcome struct {
		copy   T
		result ctrl.Result
		err    error
	}
	outcomes := make([]outcome, len(steps))
	for i := range steps {
		// Copied before any member starts, so no member reads obj while
		// another goroutine could be reading it too.
		outcomes[i].copy = obj.DeepCopyObject().(T)
	}
	var wg sync.WaitGroup
	for i, step := range steps {
		wg.Go(func() {
			o := &outcomes[i]
			o.result, o.err = p.runStep(ctx, o.copy, base, state, step)
		})
	}
	wg.Wait()

	var firstErr error
	var result ctrl.Result
	for i, step := range steps {
		o := outcomes[i]
		mergeCondition(obj, o.copy, step.Condition)
		if step.MergeStatus != nil {
			step.MergeStatus(obj, o.copy)
		}
		if firstErr == nil && o.err != nil {
			firstErr = o.err
		}
		result = shorter(result, o.result)
	}
	if firstErr != nil {
		return ctrl.Result{}, firstErr
	}
	return result, nil
}

// mergeCondition makes obj's condition typ what the member left on its copy,
// including its absence.
func mergeCondition(obj, member Object, typ string) {
	if typ == "" {
		return
	}
	conds := obj.GetConditions()
	if c := meta.FindStatusCondition(member.GetConditions(), typ); c != nil {
		meta.SetStatusCondition(&conds, *c)
	} else {
		meta.RemoveStatusCondition(&conds, typ)
	}
	obj.SetConditions(conds)
}

// shorter returns the result that comes back sooner: the shorter positive
// RequeueAfter, else a bare Requeue (rate-limited, so not bounded by any
// delay a sibling asked for, which is why a delay wins over it).
func shorter(a, b ctrl.Result) ctrl.Result {
	switch {
	case b.IsZero():
		return a
	case a.IsZero():
		return b
	case b.RequeueAfter > 0 && (a.RequeueAfter == 0 || b.RequeueAfter < a.RequeueAfter):
		return b
	default:
		return a
	}
}

// SetCondition sets the condition typ on obj at obj's generation. Like
// meta.SetStatusCondition, it keeps the lastTransitionTime unless the status
// changes.
func SetCondition(obj Object, typ string, status metav1.ConditionStatus, reason, message string) {
	conds := obj.GetConditions()
	meta.SetStatusCondition(&conds, metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            truncateMessage(message),
		ObservedGeneration: obj.GetGeneration(),
	})
	obj.SetConditions(conds)
}

// Concurrently runs a step's independent calls at once, so a step that
// writes several children waits for one round trip rather than one each,
// and joins their errors in the order of fns. A panic in one is raised
// again in the caller once all have returned, so the step's own recovery
// reports it as it would any other.
func Concurrently(fns ...func() error) error {
	errs := make([]error, len(fns))
	panics := make([]any, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() {
			defer func() {
				if r := recover(); r != nil {
					panics[i] = fmt.Sprintf("%v\n%s", r, debug.Stack())
				}
			}()
			errs[i] = fn()
		})
	}
	wg.Wait()
	for _, r := range panics {
		if r != nil {
			panic(r)
		}
	}
	return errors.Join(errs...)
}
