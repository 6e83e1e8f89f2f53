package operator

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func request(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
}

// A watch event's add waits out the delay, however many arrive; what the
// reconciler asks for (a requeue after a time, the backoff after an error)
// does not.
func TestCoalescingQueueHoldsEventsOnly(t *testing.T) {
	rateLimiter := workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Millisecond, time.Second)
	q := newQueue(time.Hour, logr.Discard())("test", rateLimiter)
	defer q.ShutDown()
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok {
		t.Fatalf("the queue is a %T; event handlers set priorities only on a priority queue", q)
	}

	event := request("event")
	for range 3 {
		q.Add(event)
	}
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: new(-100)}, event)
	if n := q.Len(); n != 0 {
		t.Fatalf("%d items ready right after the events; want them held for the delay", n)
	}

	// As controller-runtime adds them after a pass.
	failed, requeued := request("failed"), request("requeued")
	pq.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, failed)
	pq.AddWithOpts(priorityqueue.AddOpts{After: time.Millisecond}, requeued)
	got := map[reconcile.Request]bool{}
	items := make(chan reconcile.Request)
	go func() {
		for range 2 {
			item, shutdown := q.Get()
			if shutdown {
				return
			}
			q.Done(item)
			items <- item
		}
	}()
	for range 2 {
		select {
		case item := <-items:
			got[item] = true
		case <-time.After(time.Minute):
			// A hang guard, not a timing assertion: both are due within
			// milliseconds.
			t.Fatalf("got only %v; the rate-limited add or the requeue was held", got)
		}
	}
	if !got[failed] || !got[requeued] {
		t.Fatalf("got %v; want the rate-limited add and the requeue, each on its own timing", got)
	}
	if n := q.Len(); n != 0 {
		t.Fatalf("%d items ready; the held event must still wait", n)
	}
}

func TestNewQueueWithoutDelayIsControllerRuntimes(t *testing.T) {
	q := newQueue(0, logr.Discard())("test", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if _, wrapped := q.(coalescingQueue); wrapped {
		t.Fatal("a zero delay still coalesces")
	}
	q.Add(request("event"))
	if n := q.Len(); n != 1 {
		t.Fatalf("%d items ready; want the event at once", n)
	}
}
