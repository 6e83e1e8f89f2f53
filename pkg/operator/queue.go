package operator

import (
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// DefaultCoalesceEvents is how long a watch event waits in a controller's
// queue by default (Options.CoalesceEvents).
const DefaultCoalesceEvents = 250 * time.Millisecond

// eventQueue is controller-runtime's priority queue with two changes to the
// adds a watch event makes.
//
// Each is held back by delay. One change of state sets off a burst of events
// (a child created, its status catching up, its siblings following, each a
// few milliseconds apart); held back, the burst wakes one pass instead of one
// each, and each pass both reads the state the burst ends in and writes that
// state's status once. A key already waiting keeps its earlier time, so a
// stream of events never postpones a pass by more than delay. The requeues a
// pass asks for (RequeueAfter, and the backoff after an error) keep their own
// timing.
//
// Each takes the priority of its key, when the controller ranks keys and the
// event names no priority of its own: controller-runtime ranks the events of
// the initial list low, and that stands.
type eventQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	delay    time.Duration
	priority func(reconcile.Request) int
}

// newQueue is controller.Options.NewQueue: the queue controller-runtime
// builds by default, coalescing watch events by delay when delay is positive
// and ranking them by priority when that is not nil.
func newQueue(delay time.Duration, priority func(reconcile.Request) int, logger logr.Logger) func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return func(name string, rateLimiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		q := priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) {
			o.Log = logger.WithValues("controller", name)
			o.RateLimiter = rateLimiter
		})
		if delay <= 0 && priority == nil {
			return q
		}
		return eventQueue{PriorityQueue: q, delay: max(delay, 0), priority: priority}
	}
}

func (q eventQueue) Add(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, item)
}

func (q eventQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.After != 0 || o.RateLimited {
		q.PriorityQueue.AddWithOpts(o, items...)
		return
	}
	o.After = q.delay
	if o.Priority != nil || q.priority == nil {
		q.PriorityQueue.AddWithOpts(o, items...)
		return
	}
	for _, item := range items {
		ranked := o
		ranked.Priority = new(q.priority(item))
		q.PriorityQueue.AddWithOpts(ranked, item)
	}
}
