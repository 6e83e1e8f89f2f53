package glanceclient

import (
	"slices"
	"time"
)

// Sample is one request of a client's traffic: when it started, what it
// was, how long it took and, for a failure, why.
type Sample struct {
	At  time.Time     `json:"at"`
	Op  string        `json:"op"`
	Dur time.Duration `json:"dur"`
	Err string        `json:"err,omitempty"`
}

// Stats summarize the requests of a window of traffic.
type Stats struct {
	Requests int `json:"requests"`
	// Pending are the requests of the window still running, not counted
	// above.
	Pending int            `json:"pending"`
	Failed  int            `json:"failed"`
	ByOp    map[string]int `json:"byOp"`
	// FailedByOp counts the failures by operation.
	FailedByOp map[string]int `json:"failedByOp,omitempty"`
	P50        time.Duration  `json:"p50"`
	P99        time.Duration  `json:"p99"`
	Max        time.Duration  `json:"max"`
	// Errors are the first failures, in order.
	Errors []Sample `json:"errors,omitempty"`
}

// maxErrors is how many failures Stats keeps.
const maxErrors = 20

// Summarize counts samples and their latency quantiles (nearest rank).
func Summarize(samples []Sample) Stats {
	st := Stats{Requests: len(samples), ByOp: map[string]int{}, FailedByOp: map[string]int{}}
	durs := make([]time.Duration, 0, len(samples))
	for _, s := range samples {
		st.ByOp[s.Op]++
		durs = append(durs, s.Dur)
		if s.Err != "" {
			st.Failed++
			st.FailedByOp[s.Op]++
			if len(st.Errors) < maxErrors {
				st.Errors = append(st.Errors, s)
			}
		}
	}
	slices.Sort(durs)
	quantile := func(q float64) time.Duration {
		if len(durs) == 0 {
			return 0
		}
		return durs[min(len(durs)-1, int(q*float64(len(durs))))]
	}
	st.P50, st.P99 = quantile(0.5), quantile(0.99)
	if len(durs) > 0 {
		st.Max = durs[len(durs)-1]
	}
	return st
}
