package operator

import (
	"fmt"
	"slices"
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
	q := newQueue(time.Hour, nil, logr.Discard())("test", rateLimiter)
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
	q := newQueue(0, nil, logr.Discard())("test", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if _, wrapped := q.(eventQueue); wrapped {
		t.Fatal("a zero delay and no ranking still wrap the queue")
	}
	q.Add(request("event"))
	if n := q.Len(); n != 1 {
		t.Fatalf("%d items ready; want the event at once", n)
	}
}

// Events take their key's rank, so the keys that got furthest are handed out
// first; an event that names its own priority (the initial list's, ranked
// low) keeps it, and so does a requeue.
func TestEventQueueRanksEventsByKey(t *testing.T) {
	rank := map[string]int{"far": 9, "middle": 4, "new": 0, "listed": 9, "requeued": 9}
	q := newQueue(0, func(r reconcile.Request) int { return rank[r.Name] }, logr.Discard())("test",
		workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	pq := q.(priorityqueue.PriorityQueue[reconcile.Request])

	q.Add(request("new"))
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: new(-100)}, request("listed"))
	pq.AddWithOpts(priorityqueue.AddOpts{}, request("middle"), request("far"))
	pq.AddWithOpts(priorityqueue.AddOpts{After: time.Millisecond, Priority: new(2)}, request("requeued"))
	for deadline := time.Now().Add(time.Minute); q.Len() < 5; time.Sleep(time.Millisecond) {
		// A hang guard, not a timing assertion: the adds are flushed
		// within milliseconds.
		if time.Now().After(deadline) {
			t.Fatalf("%d of 5 items ready", q.Len())
		}
	}
	var got []string
	for range 5 {
		item, priority, _ := pq.GetWithPriority()
		got = append(got, fmt.Sprintf("%s:%d", item.Name, priority))
		q.Done(item)
	}
	want := []string{"far:9", "middle:4", "requeued:2", "new:0", "listed:-100"}
	if !slices.Equal(got, want) {
		t.Fatalf("handed out %v; want %v", got, want)
	}
}
