package operatortest

import (
	"slices"
	"sync"
)

// WarningRecorder collects the warnings the API server returns (code 299),
// as kubectl prints them: set it as a rest.Config's WarningHandler.
type WarningRecorder struct {
	mu    sync.Mutex
	texts []string
}

// HandleWarningHeader records a warning.
func (w *WarningRecorder) HandleWarningHeader(code int, _ string, text string) {
	if code == 299 {
		w.mu.Lock()
		w.texts = append(w.texts, text)
		w.mu.Unlock()
	}
}

// Texts returns the warnings so far, in order.
func (w *WarningRecorder) Texts() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.texts)
}

// Has reports whether text was among the warnings.
func (w *WarningRecorder) Has(text string) bool {
	return slices.Contains(w.Texts(), text)
}
