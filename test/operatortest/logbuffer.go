package operatortest

import (
	"bytes"
	"sync"
)

// LogBuffer is a bytes.Buffer that the loggers of many goroutines write to
// and a test reads while they do.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *LogBuffer) String() string { return b.Since(0) }

// Len is how much was written so far: an offset for Since.
func (b *LogBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// Since is what was written after offset.
func (b *LogBuffer) Since(offset int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf.Bytes()[offset:])
}
