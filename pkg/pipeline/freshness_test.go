package pipeline_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/c5c3/glance-operator/pkg/pipeline"
)

func TestWrittenVersions(t *testing.T) {
	var w pipeline.WrittenVersions
	key, other := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	if w.Stale(key, "5") {
		t.Fatal("stale before any write")
	}
	w.Record(key, "10")
	w.Record(key, "9") // an older copy's version never lowers the mark
	for rv, want := range map[string]bool{"9": true, "10": false, "11": false, "not-a-number": false} {
		if got := w.Stale(key, rv); got != want {
			t.Errorf("Stale(%q) = %v, want %v", rv, got, want)
		}
	}
	if w.Stale(other, "1") {
		t.Error("another object's write makes this one stale")
	}
	w.Forget(key)
	if w.Stale(key, "9") {
		t.Error("stale after Forget")
	}
}
