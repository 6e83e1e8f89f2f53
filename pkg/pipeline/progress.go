package pipeline

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Progress remembers how far each object got in its last pass: how many of
// the pipeline's sub-conditions were True after it. A controller's queue
// hands out the keys that got furthest first (Of is their priority), so that
// when more keys are ready than there are workers, as after a burst of new
// objects, the objects nearest to Ready reach it first, instead of every
// object reaching it at nearly the same late moment.
type Progress struct {
	mu    sync.Mutex
	steps map[types.NamespacedName]int
}

// Record remembers the sub-conditions of obj that are True.
func (p *Progress) Record(key types.NamespacedName, done int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.steps == nil {
		p.steps = map[types.NamespacedName]int{}
	}
	p.steps[key] = done
}

// Of is the recorded progress of key; 0 for a key never recorded.
func (p *Progress) Of(key types.NamespacedName) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.steps[key]
}

// Forget drops an object that is gone.
func (p *Progress) Forget(key types.NamespacedName) {
	p.mu.Lock()
	delete(p.steps, key)
	p.mu.Unlock()
}
