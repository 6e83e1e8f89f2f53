package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
)

// kstatusOf is what kstatus, as Flux runs it, makes of g.
func kstatusOf(t *testing.T, g *v1alpha1.Glance) kstatus.Status {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(g)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: u}
	obj.SetAPIVersion(v1alpha1.GroupVersion.String())
	obj.SetKind("Glance")
	res, err := kstatus.Compute(obj)
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

// broken is the reason the test pipelines' Health counts as a failure.
const broken = "Broken"

// TestHealth: Reconciling and Stalled follow the sub-conditions, a
// terminal error stalls its step's condition, and kstatus reads the result
// as in progress, failed or current.
func TestHealth(t *testing.T) {
	cond := preset
	stalledB := metav1.Condition{Type: condB, Status: "False", Reason: broken, Message: "B is broken.", LastTransitionTime: metav1.Now()}
	refusing := func(err error) stage {
		return pipeline.Single(step{Name: "Refuses", Condition: condC, FailureReason: "Refused",
			Run: func(context.Context, glance, pass) (ctrl.Result, error) { return ctrl.Result{}, err }})
	}
	for _, tc := range []struct {
		name             string
		preset           []metav1.Condition
		stages           []stage
		reconciling      metav1.ConditionStatus
		reconcilingWhy   string
		stalled          metav1.ConditionStatus
		stalledWhy       string
		stalledMessage   string
		kstatus          kstatus.Status
		reconcilingSaysA bool
	}{
		{name: "all True", preset: []metav1.Condition{cond(condA, "True"), cond(condB, "True"), cond(condC, "True")},
			reconciling: "False", reconcilingWhy: pipeline.ReasonReconciled, stalled: "False", stalledWhy: pipeline.ReasonNoFailure,
			kstatus: kstatus.CurrentStatus},
		{name: "one waits", preset: []metav1.Condition{cond(condA, "False"), cond(condB, "True"), cond(condC, "True")},
			reconciling: "True", reconcilingWhy: pipeline.ReasonProgressing, stalled: "False", stalledWhy: pipeline.ReasonNoFailure,
			kstatus: kstatus.InProgressStatus, reconcilingSaysA: true},
		{name: "one not evaluated yet", preset: []metav1.Condition{cond(condB, "True"), cond(condC, "True")},
			reconciling: "True", reconcilingWhy: pipeline.ReasonProgressing, stalled: "False", stalledWhy: pipeline.ReasonNoFailure,
			kstatus: kstatus.InProgressStatus, reconcilingSaysA: true},
		{name: "a failure Health names", preset: []metav1.Condition{cond(condA, "False"), stalledB, cond(condC, "True")},
			reconciling: "False", reconcilingWhy: pipeline.ReasonStalled, stalled: "True", stalledWhy: broken,
			stalledMessage: "BReady: B is broken.", kstatus: kstatus.FailedStatus},
		{name: "a terminal error", preset: []metav1.Condition{cond(condA, "True"), cond(condB, "True")},
			stages:      []stage{refusing(reconcile.TerminalError(errors.New("spec.x cannot be rendered")))},
			reconciling: "False", reconcilingWhy: pipeline.ReasonStalled, stalled: "True", stalledWhy: "Refused",
			stalledMessage: "CReady: spec.x cannot be rendered", kstatus: kstatus.FailedStatus},
		{name: "a retried error is under way", preset: []metav1.Condition{cond(condA, "True"), cond(condB, "True")},
			stages:      []stage{refusing(errors.New("the API server went away"))},
			reconciling: "True", reconcilingWhy: pipeline.ReasonProgressing, stalled: "False", stalledWhy: pipeline.ReasonNoFailure,
			kstatus: kstatus.InProgressStatus},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, newGlance(tc.preset...), tc.stages...)
			e.p.Health = &pipeline.Health{Stalled: func(c metav1.Condition) bool { return c.Reason == broken }}
			g, _, _, _ := e.run(t)
			for _, stored := range []*v1alpha1.Glance{g, e.get(t)} {
				r := wantCondition(t, stored, pipeline.ConditionReconciling, tc.reconciling, tc.reconcilingWhy)
				s := wantCondition(t, stored, pipeline.ConditionStalled, tc.stalled, tc.stalledWhy)
				if tc.stalledMessage != "" && s.Message != tc.stalledMessage {
					t.Errorf("Stalled message %q, want %q", s.Message, tc.stalledMessage)
				}
				if ready := condition(t, stored, ready); tc.reconciling == "True" && r.Message != ready.Message {
					t.Errorf("Reconciling message %q, want Ready's %q", r.Message, ready.Message)
				}
				if tc.reconcilingSaysA && !strings.HasPrefix(r.Message, condA+": ") {
					t.Errorf("Reconciling message %q does not name %s first", r.Message, condA)
				}
				if got := kstatusOf(t, stored); got != tc.kstatus {
					t.Errorf("kstatus %s, want %s; conditions %+v", got, tc.kstatus, stored.Status.Conditions)
				}
			}
			// After the sub-conditions, in a fixed place.
			var order []string
			for _, c := range e.get(t).Status.Conditions {
				order = append(order, c.Type)
			}
			if i, j := slices.Index(order, pipeline.ConditionReconciling), slices.Index(order, pipeline.ConditionStalled); i < 0 || j != i+1 || slices.ContainsFunc(order[i:], func(typ string) bool { return slices.Contains(subConditions, typ) }) {
				t.Errorf("conditions stored in the order %v, want Reconciling, Stalled after the sub-conditions", order)
			}
		})
	}
	for name, pair := range map[string][2]string{
		"Reconciling": {pipeline.ConditionReconciling, v1alpha1.ConditionReconciling},
		"Stalled":     {pipeline.ConditionStalled, v1alpha1.ConditionStalled},
		"Progressing": {pipeline.ReasonProgressing, v1alpha1.ReasonProgressing},
		"Reconciled":  {pipeline.ReasonReconciled, v1alpha1.ReasonReconciled},
		"StalledWhy":  {pipeline.ReasonStalled, v1alpha1.ReasonStalled},
		"NoFailure":   {pipeline.ReasonNoFailure, v1alpha1.ReasonNoFailure},
	} {
		if pair[0] != pair[1] {
			t.Errorf("%s: the pipeline's %q differs from the API's %q", name, pair[0], pair[1])
		}
	}
}

// TestWithoutHealthNoKstatusConditions: a pipeline without Health adds
// neither condition.
func TestWithoutHealthNoKstatusConditions(t *testing.T) {
	e := newEnv(t, newGlance(preset(condA, "False")))
	g, _, _, err := e.run(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{pipeline.ConditionReconciling, pipeline.ConditionStalled} {
		if c := meta.FindStatusCondition(g.Status.Conditions, typ); c != nil {
			t.Errorf("%s set without Health: %+v", typ, c)
		}
	}
}

// TestHeldPassObservesNoGeneration: a held pass applies no spec, so the
// status keeps the generation it last observed, and Reconciling and Stalled
// stay as they were: kstatus reads a spec change made meanwhile as in
// progress, where it read the status as current before the change.
func TestHeldPassObservesNoGeneration(t *testing.T) {
	applied := []metav1.Condition{
		preset(ready, "True"), preset(condA, "True"), preset(condB, "True"), preset(condC, "True"),
		{Type: pipeline.ConditionReconciling, Status: "False", Reason: pipeline.ReasonReconciled, ObservedGeneration: 3, LastTransitionTime: metav1.Now()},
		{Type: pipeline.ConditionStalled, Status: "False", Reason: pipeline.ReasonNoFailure, ObservedGeneration: 3, LastTransitionTime: metav1.Now()},
	}
	g := newGlance(applied...)
	g.Status.ObservedGeneration = 3
	e := newEnv(t, g)
	e.p.Hold = &pipeline.Hold{Reason: "Held", Message: "held on purpose"}
	e.p.Health = &pipeline.Health{}

	held, _, _, err := e.run(t)
	if err != nil {
		t.Fatal(err)
	}
	if got := kstatusOf(t, held); got != kstatus.CurrentStatus {
		t.Errorf("held with the spec applied: kstatus %s, want Current", got)
	}

	// The spec changes while held: generation 4.
	changed := e.get(t)
	changed.Generation = 4
	if err := e.client.Update(context.Background(), changed); err != nil {
		t.Fatal(err)
	}
	held, _, _, err = e.run(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, stored := range []*v1alpha1.Glance{held, e.get(t)} {
		if stored.Status.ObservedGeneration != 3 {
			t.Errorf("a held pass stamped observedGeneration %d, want it left at 3", stored.Status.ObservedGeneration)
		}
		wantCondition(t, stored, ready, "True", "Held")
		for _, typ := range []string{pipeline.ConditionReconciling, pipeline.ConditionStalled} {
			if c := condition(t, stored, typ); c.ObservedGeneration != 3 || c.Status != "False" {
				t.Errorf("a held pass changed %s to %+v", typ, c)
			}
		}
		if got := kstatusOf(t, stored); got != kstatus.InProgressStatus {
			t.Errorf("held with an unapplied spec change: kstatus %s, want InProgress", got)
		}
	}

	// Released, the pass applies generation 4.
	e.p.Hold = nil
	applied4, _, _, err := e.run(t)
	if err != nil {
		t.Fatal(err)
	}
	if applied4.Status.ObservedGeneration != 4 || kstatusOf(t, applied4) != kstatus.CurrentStatus {
		t.Errorf("after the hold: observedGeneration %d, kstatus %s; want 4, Current", applied4.Status.ObservedGeneration, kstatusOf(t, applied4))
	}
}
