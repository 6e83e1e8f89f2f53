package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// finishStatus recomputes the aggregate condition, exactly the AND of the
// sub-conditions (or holds it, see Hold), and with Health the conditions
// Reconciling and Stalled, and stamps obj's generation on the status and on
// the aggregate. A step error leaves its condition False (see
// Step.FailureReason), so the aggregate never vouches for a failed pass.
// runErr is the pass's error.
func (p *Pipeline[T, S]) finishStatus(obj T, runErr error) {
	switch {
	case p.Aggregate != "" && p.Hold != nil:
		status := metav1.ConditionUnknown
		if c := meta.FindStatusCondition(obj.GetConditions(), p.Aggregate); c != nil {
			status = c.Status
		}
		SetCondition(obj, p.Aggregate, status, p.Hold.Reason, p.Hold.Message)
	case p.Aggregate != "":
		notTrue := p.notTrue(obj)
		if len(notTrue) == 0 {
			SetCondition(obj, p.Aggregate, metav1.ConditionTrue, ReasonAllReady,
				"All sub-conditions are True.")
		} else {
			SetCondition(obj, p.Aggregate, metav1.ConditionFalse, ReasonNotAllReady, p.whyNot(obj, notTrue))
		}
		p.judgeHealth(obj, notTrue, runErr)
	}
	p.orderConditions(obj)
	if p.Hold == nil {
		// A held pass applied nothing of the spec: stamping its generation
		// would tell kstatus that a spec change made meanwhile is rolled out.
		obj.SetObservedGeneration(obj.GetGeneration())
	}
}

// Health is how a pipeline reports in kstatus's terms
// (sigs.k8s.io/cli-utils/pkg/kstatus), which judges a custom resource by
// status.observedGeneration and by two abnormal-true conditions alone:
// Reconciling True is in progress, Stalled True is failed, neither is
// current. Every pass that is not held sets both, from the sub-conditions:
//
//   - Stalled is True when a sub-condition that is not True is a failure
//     (Stalled says which), or when the pass ended on a terminal error,
//     which only a change can fix: its reason is that sub-condition's, its
//     message names it; the first such one in SubConditions order counts;
//   - otherwise Reconciling is True while any sub-condition is not True,
//     with the aggregate's message;
//   - each is False otherwise, so both always say what was judged.
type Health struct {
	// Stalled says whether c, a sub-condition that is not True, reports a
	// failure rather than something still under way: a failed Job, a spec
	// the reconciler refuses. Nil counts only terminal errors.
	Stalled func(c metav1.Condition) bool
}

// Condition types and reasons of Health, kstatus's names; the same strings
// as the v1alpha1 constants, kept here so the pipeline does not depend on
// one API version.
const (
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
	// ReasonProgressing: Reconciling is True, some sub-condition is not.
	ReasonProgressing = "Progressing"
	// ReasonReconciled: Reconciling is False, every sub-condition is True.
	ReasonReconciled = "Reconciled"
	// ReasonStalled: Reconciling is False because Stalled is True.
	ReasonStalled = "Stalled"
	// ReasonNoFailure: Stalled is False.
	ReasonNoFailure = "NoFailure"
)

// judgeHealth sets Reconciling and Stalled, see Health.
func (p *Pipeline[T, S]) judgeHealth(obj T, notTrue []string, runErr error) {
	if p.Health == nil {
		return
	}
	if c := p.stalled(obj, notTrue, runErr); c != nil {
		SetCondition(obj, ConditionStalled, metav1.ConditionTrue, c.Reason, c.Type+": "+c.Message)
		SetCondition(obj, ConditionReconciling, metav1.ConditionFalse, ReasonStalled,
			"Stalled on "+c.Type+": see the Stalled condition.")
		return
	}
	SetCondition(obj, ConditionStalled, metav1.ConditionFalse, ReasonNoFailure, "No sub-condition reports a failure.")
	if len(notTrue) > 0 {
		SetCondition(obj, ConditionReconciling, metav1.ConditionTrue, ReasonProgressing, p.whyNot(obj, notTrue))
		return
	}
	SetCondition(obj, ConditionReconciling, metav1.ConditionFalse, ReasonReconciled, "All sub-conditions are True.")
}

// stalled is the first of the sub-conditions notTrue that is a failure:
// one Health.Stalled names, or the condition of the step whose terminal
// error ended the pass. Nil when there is none.
func (p *Pipeline[T, S]) stalled(obj T, notTrue []string, runErr error) *metav1.Condition {
	terminal := ""
	var se *stepError
	if errors.Is(runErr, reconcile.TerminalError(nil)) && errors.As(runErr, &se) {
		terminal = se.condition
	}
	for _, typ := range notTrue {
		c := meta.FindStatusCondition(obj.GetConditions(), typ)
		if c == nil {
			continue
		}
		if typ == terminal || (p.Health.Stalled != nil && p.Health.Stalled(*c)) {
			return c
		}
	}
	return nil
}

// orderConditions puts the aggregate first and the sub-conditions after it
// in the order of SubConditions, the pipeline's, so that kubectl describe
// reads as the pass ran, whichever step set a condition first; then
// Reconciling and Stalled; any other condition keeps its place after them.
// The order is the same every pass, so it never makes a status write of its
// own but once.
func (p *Pipeline[T, S]) orderConditions(obj T) {
	rank := func(typ string) int {
		if typ == p.Aggregate {
			return 0
		}
		if i := slices.Index(p.SubConditions, typ); i >= 0 {
			return i + 1
		}
		if p.Health != nil {
			switch typ {
			case ConditionReconciling:
				return len(p.SubConditions) + 1
			case ConditionStalled:
				return len(p.SubConditions) + 2
			}
		}
		return len(p.SubConditions) + 3
	}
	conds := obj.GetConditions()
	slices.SortStableFunc(conds, func(a, b metav1.Condition) int { return cmp.Compare(rank(a.Type), rank(b.Type)) })
	obj.SetConditions(conds)
}

// keepTransitionTimes settles each condition once per pass: a condition
// whose status ends the pass as it began it keeps the transition time it
// had, however many steps set it on the way (SecretsReady, which three
// steps share, may turn True in one and False again in a later one).
func keepTransitionTimes(obj, base Object) {
	conds := obj.GetConditions()
	for i := range conds {
		if was := meta.FindStatusCondition(base.GetConditions(), conds[i].Type); was != nil && was.Status == conds[i].Status {
			conds[i].LastTransitionTime = was.LastTransitionTime
		}
	}
	obj.SetConditions(conds)
}

// whyNot says why the aggregate is not True: each of the sub-conditions
// notTrue, in their order, with its reason and what Detail adds, so that
// the aggregate's message alone (kubectl get -o wide) tells what to look at.
func (p *Pipeline[T, S]) whyNot(obj T, notTrue []string) string {
	parts := make([]string, len(notTrue))
	for i, typ := range notTrue {
		c := meta.FindStatusCondition(obj.GetConditions(), typ)
		switch {
		case c == nil:
			parts[i] = typ + ": not evaluated yet"
		default:
			parts[i] = typ + ": " + c.Reason
			if p.Detail != nil {
				if d := p.Detail(obj, *c); d != "" {
					parts[i] += " (" + d + ")"
				}
			}
		}
	}
	return strings.Join(parts, "; ") + "."
}

// notTrue are the SubConditions obj does not have True, in their order.
func (p *Pipeline[T, S]) notTrue(obj T) []string {
	conds := obj.GetConditions()
	var out []string
	for _, typ := range p.SubConditions {
		if !meta.IsStatusConditionTrue(conds, typ) {
			out = append(out, typ)
		}
	}
	return out
}

// Done is how many of the SubConditions obj has True: its progress.
func (p *Pipeline[T, S]) Done(obj T) int {
	return len(p.SubConditions) - len(p.notTrue(obj))
}

// Reasons of the aggregate condition; the same strings as
// v1alpha1.ReasonAllReady and v1alpha1.ReasonNotAllReady, kept here so the
// pipeline does not depend on one API version.
const (
	ReasonAllReady    = "AllReady"
	ReasonNotAllReady = "NotAllReady"
)

// writeStatus writes obj's status when it differs from base (obj as Run
// received it), as a JSON merge patch of the status subresource. Steps
// never change the spec or metadata, so the patch holds the status diff
// alone (the API server would ignore anything else sent to the
// subresource); it carries no resourceVersion, so it can neither revert a
// concurrent spec edit nor conflict.
func (p *Pipeline[T, S]) writeStatus(ctx context.Context, obj, base T) error {
	patch := client.MergeFrom(base)
	data, err := patch.Data(obj)
	if err != nil {
		return fmt.Errorf("status merge patch: %w", err)
	}
	if string(data) == "{}" {
		return nil
	}
	if err := p.Status.Patch(ctx, obj, client.RawPatch(patch.Type(), data)); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}
