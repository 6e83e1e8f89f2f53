package operator

import (
	"strings"
	"testing"
	"time"
)

func TestStaleCacheLimit(t *testing.T) {
	for _, limit := range []time.Duration{0, time.Second, time.Minute} {
		if err := checkStaleCacheLimit(Options{StaleCacheLimit: limit}); err != nil {
			t.Errorf("%s: %v", limit, err)
		}
	}
	err := checkStaleCacheLimit(Options{StaleCacheLimit: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "--stale-cache-limit (-1s)") {
		t.Errorf("a negative limit: %v, want a refusal naming the flag", err)
	}
}
