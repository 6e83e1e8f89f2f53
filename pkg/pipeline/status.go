package pipeline

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// finishStatus recomputes the aggregate condition, exactly the AND of the
// sub-conditions (or holds it, see Hold), and stamps obj's generation on
// the status and on the aggregate. A step error leaves its condition False (see
// Step.FailureReason), so the aggregate never vouches for a failed pass.
func (p *Pipeline[T, S]) finishStatus(obj T) {
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
	}
	p.orderConditions(obj)
	obj.SetObservedGeneration(obj.GetGeneration())
}

// orderConditions puts the aggregate first and the sub-conditions after it
// in the order of SubConditions, the pipeline's, so that kubectl describe
// reads as the pass ran, whichever step set a condition first; any other
// condition keeps its place after them. The order is the same every pass,
// so it never makes a status write of its own but once.
func (p *Pipeline[T, S]) orderConditions(obj T) {
	rank := func(typ string) int {
		if typ == p.Aggregate {
			return 0
		}
		if i := slices.Index(p.SubConditions, typ); i >= 0 {
			return i + 1
		}
		return len(p.SubConditions) + 1
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
