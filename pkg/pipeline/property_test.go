package pipeline_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
)

// outcome is what one step does in a random pass.
type outcome int

const (
	setTrue outcome = iota
	setFalse
	setFalseRequeue
	untouched
	errUntouched
	setTrueThenErr
	setFalseThenErr
	panics
	outcomes
)

func (o outcome) fails() bool {
	return o == errUntouched || o == setTrueThenErr || o == setFalseThenErr || o == panics
}

func (o outcome) sets() bool {
	return o == setTrue || o == setFalse || o == setFalseRequeue || o == setTrueThenErr || o == setFalseThenErr
}

// TestPipelineInvariantsUnderRandomOutcomes runs random step outcomes on
// random prior statuses and checks what the status skeleton promises:
//   - Ready is exactly the AND of the sub-conditions;
//   - a failed step's condition is False;
//   - a condition carries the generation it was evaluated against: the
//     current one when its step set it or failed, its own otherwise;
//   - the conditions of steps the pass did not reach are as they were;
//   - Stalled is True exactly when a sub-condition reports a failure
//     Health names, and Reconciling exactly when none does and not all
//     sub-conditions are True.
func TestPipelineInvariantsUnderRandomOutcomes(t *testing.T) {
	conds := []string{"S1Ready", "S2Ready", "S3Ready", "P1Ready", "P2Ready", "P3Ready"}
	const gen = 9
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 42))
		plan := make(map[string]outcome, len(conds))
		ran := map[string]bool{}
		stepOf := func(cond string) step {
			name := "step-" + cond
			return step{Name: name, Condition: cond, FailureReason: "Failed" + cond, Run: func(_ context.Context, g glance, _ pass) (ctrl.Result, error) {
				boom := fmt.Errorf("%s broke", name)
				switch plan[cond] {
				case setTrue:
					pipeline.SetCondition(g, cond, metav1.ConditionTrue, "Fine", "")
				case setFalse:
					pipeline.SetCondition(g, cond, metav1.ConditionFalse, "Waiting", "")
				case setFalseRequeue:
					pipeline.SetCondition(g, cond, metav1.ConditionFalse, "Polling", "")
					return ctrl.Result{RequeueAfter: time.Second}, nil
				case errUntouched:
					return ctrl.Result{}, boom
				case setTrueThenErr:
					pipeline.SetCondition(g, cond, metav1.ConditionTrue, "Fine", "")
					return ctrl.Result{}, boom
				case setFalseThenErr:
					pipeline.SetCondition(g, cond, metav1.ConditionFalse, "OwnFailure", "")
					return ctrl.Result{}, boom
				case panics:
					panic("boom")
				}
				return ctrl.Result{}, nil
			}}
		}
		var prior []metav1.Condition
		for _, c := range conds {
			plan[c] = outcome(rng.IntN(int(outcomes)))
			if rng.IntN(3) > 0 {
				status := metav1.ConditionTrue
				if rng.IntN(2) == 0 {
					status = metav1.ConditionFalse
				}
				prior = append(prior, metav1.Condition{Type: c, Status: status, Reason: "Prior", ObservedGeneration: int64(1 + rng.IntN(gen-1)),
					LastTransitionTime: metav1.NewTime(time.Unix(1_700_000_000, 0))})
			}
		}
		g := newGlance(prior...)
		g.Generation = gen
		c := fake.NewClientBuilder().WithScheme(newScheme(t)).WithStatusSubresource(&v1alpha1.Glance{}).WithObjects(g).Build()
		p := &pipeline.Pipeline[glance, pass]{
			Stages: []stage{
				pipeline.Single(stepOf(conds[0])), pipeline.Single(stepOf(conds[1])), pipeline.Single(stepOf(conds[2])),
				pipeline.Parallel(stepOf(conds[3]), stepOf(conds[4]), stepOf(conds[5])),
			},
			Aggregate: ready, SubConditions: conds, Status: c.Status(),
			Health: &pipeline.Health{Stalled: func(c metav1.Condition) bool { return c.Reason == "OwnFailure" }},
		}
		// Which steps the pass reaches follows from the plan: sequential
		// steps stop the pass on an error or a requeue; the group runs whole.
		reached := true
		for i, cond := range conds {
			ran[cond] = reached
			if i < 3 && (plan[cond].fails() || plan[cond] == setFalseRequeue) {
				reached = false
			}
		}

		stored := &v1alpha1.Glance{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(g), stored); err != nil {
			t.Fatal(err)
		}
		_, runErr := p.Run(context.Background(), stored, &trace{})
		anyFailed := false
		for _, cond := range conds {
			anyFailed = anyFailed || (ran[cond] && plan[cond].fails())
		}
		if (runErr != nil) != anyFailed {
			t.Fatalf("seed %d: Run error %v, want an error: %v (plan %v)", seed, runErr, anyFailed, plan)
		}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(g), stored); err != nil {
			t.Fatal(err)
		}

		allTrue, failure := true, false
		for _, cond := range conds {
			got := meta.FindStatusCondition(stored.Status.Conditions, cond)
			allTrue = allTrue && got != nil && got.Status == metav1.ConditionTrue
			failure = failure || (got != nil && got.Status != metav1.ConditionTrue && got.Reason == "OwnFailure")
			was := meta.FindStatusCondition(prior, cond)
			o := plan[cond]
			switch {
			case !ran[cond] || o == untouched:
				if (was == nil) != (got == nil) || (was != nil && (got.Status != was.Status || got.Reason != was.Reason || got.ObservedGeneration != was.ObservedGeneration)) {
					t.Errorf("seed %d: %s (%v, reached %v) changed from %+v to %+v", seed, cond, o, ran[cond], was, got)
				}
			case o.fails():
				if got == nil || got.Status != metav1.ConditionFalse || got.ObservedGeneration != gen {
					t.Errorf("seed %d: failed step's %s = %+v, want False at generation %d", seed, cond, got, gen)
				}
			case o.sets():
				if got == nil || got.ObservedGeneration != gen {
					t.Errorf("seed %d: %s = %+v, want it at generation %d", seed, cond, got, gen)
				}
			}
		}
		r := meta.FindStatusCondition(stored.Status.Conditions, ready)
		if r == nil || (r.Status == metav1.ConditionTrue) != allTrue || r.ObservedGeneration != gen {
			t.Errorf("seed %d: Ready %+v, want True exactly when all six are (%v), at generation %d", seed, r, allTrue, gen)
		}
		stalled := meta.IsStatusConditionTrue(stored.Status.Conditions, pipeline.ConditionStalled)
		reconciling := meta.IsStatusConditionTrue(stored.Status.Conditions, pipeline.ConditionReconciling)
		if stalled != failure || reconciling != (!failure && !allTrue) {
			t.Errorf("seed %d: Stalled %v, Reconciling %v; want %v, %v (all True: %v)", seed, stalled, reconciling, failure, !failure && !allTrue, allTrue)
		}
		if stored.Status.ObservedGeneration != gen {
			t.Errorf("seed %d: status.observedGeneration %d, want %d", seed, stored.Status.ObservedGeneration, gen)
		}
		if t.Failed() {
			return
		}
	}
}
