package manager

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	glancecontroller "github.com/c5c3/glance-operator/pkg/controller/glance"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// setFinalizers edits the Glance's finalizers as another controller would,
// with an update that carries the resourceVersion it read.
func setFinalizers(ctx context.Context, key client.ObjectKey, edit func([]string) []string) error {
	for {
		g := &v1alpha1.Glance{}
		if err := cl.Get(ctx, key, g); err != nil {
			return err
		}
		g.Finalizers = edit(g.Finalizers)
		err := cl.Update(ctx, g)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// TestFinalizerPatchesKeepOthers: another controller adds its finalizer to
// the Glance just before the operator adds its own, and removes it just
// before the operator does: the operator's patches never drop the other's
// finalizer, nor bring it back.
func TestFinalizerPatchesKeepOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := client.ObjectKey{Namespace: e.NS, Name: "glance"}
	var mu sync.Mutex
	race := func(f []string) []string { return append(f, "example.com/other") }
	mgr.BeforePatch(func(ctx context.Context, obj client.Object) {
		if _, ok := obj.(*v1alpha1.Glance); !ok || obj.GetNamespace() != e.NS {
			return
		}
		mu.Lock()
		edit := race
		race = nil
		mu.Unlock()
		if edit == nil {
			return
		}
		if err := setFinalizers(ctx, key, edit); err != nil {
			t.Errorf("the other controller's write: %v", err)
		}
	})
	t.Cleanup(func() {
		mgr.BeforePatch(nil)
		if err := setFinalizers(context.Background(), key, func([]string) []string { return nil }); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("clear the finalizers: %v", err)
		}
	})
	finalizers := func(want ...string) {
		t.Helper()
		operatortest.Eventually(t, fmt.Sprintf("finalizers %v", want), func() error {
			g := &v1alpha1.Glance{}
			if err := cl.Get(context.Background(), key, g); err != nil {
				return err
			}
			if got := slices.Sorted(slices.Values(g.Finalizers)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
				return fmt.Errorf("finalizers %v", got)
			}
			return nil
		})
	}

	e.Credentials("pw")
	e.DefaultBackend("alpha")
	e.Glance()
	finalizers("example.com/other", glancecontroller.Finalizer)

	// On deletion the other controller lets go at the same moment as the
	// operator: neither brings the other's back, and the Glance goes.
	mu.Lock()
	race = func(f []string) []string {
		return slices.DeleteFunc(f, func(s string) bool { return s == "example.com/other" })
	}
	mu.Unlock()
	g := &v1alpha1.Glance{}
	if err := cl.Get(context.Background(), key, g); err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	operatortest.Eventually(t, "the Glance gone", func() error {
		err := cl.Get(context.Background(), key, g)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v), finalizers %v", err, g.Finalizers)
	})
}
