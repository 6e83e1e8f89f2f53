package pipeline_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/c5c3/glance-operator/pkg/pipeline"
)

func TestWrittenVersions(t *testing.T) {
	var w pipeline.WrittenVersions
	key, other := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	if w.Check(key, "5") != pipeline.Fresh {
		t.Fatal("stale before any write")
	}
	w.Record(key, "10")
	w.Record(key, "9") // an older copy's version never lowers the mark
	for rv, want := range map[string]pipeline.Freshness{"9": pipeline.Stale, "10": pipeline.Fresh, "11": pipeline.Fresh, "not-a-number": pipeline.Fresh} {
		if got := w.Check(key, rv); got != want {
			t.Errorf("Stale(%q) = %v, want %v", rv, got, want)
		}
	}
	if w.Check(other, "1") != pipeline.Fresh {
		t.Error("another object's write makes this one stale")
	}
	w.Forget(key)
	if w.Check(key, "9") != pipeline.Fresh {
		t.Error("stale after Forget")
	}
}

// TestWrittenVersionsGiveUp: after an etcd restore the versions went back
// for good; the record is given up once, after the limit: the default one,
// or the manager's.
func TestWrittenVersionsGiveUp(t *testing.T) {
	for _, limit := range []time.Duration{0, 5 * time.Second} {
		t.Run(limit.String(), func(t *testing.T) { testGiveUp(t, limit) })
	}
}

func testGiveUp(t *testing.T, limit time.Duration) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	w := pipeline.WrittenVersions{Now: func() time.Time { return now }, Limit: limit}
	want := limit
	if limit == 0 {
		want = pipeline.DefaultStaleCacheLimit
	}
	if got := w.GiveUpAfter(); got != want {
		t.Fatalf("GiveUpAfter() = %s, want %s", got, want)
	}
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	w.Record(key, "900")
	now = now.Add(want)
	if got := w.Check(key, "12"); got != pipeline.Stale {
		t.Fatalf("Check at the limit = %v, want Stale", got)
	}
	now = now.Add(time.Second)
	if got := w.Check(key, "12"); got != pipeline.GaveUp {
		t.Fatalf("Check past the limit = %v, want GaveUp", got)
	}
	if got := w.Check(key, "12"); got != pipeline.Fresh {
		t.Fatalf("Check after giving up = %v, want Fresh (said once)", got)
	}
	// The next write is recorded afresh, at its own time.
	w.Record(key, "13")
	if got := w.Check(key, "12"); got != pipeline.Stale {
		t.Errorf("Check of a copy older than the new write = %v, want Stale", got)
	}
}
