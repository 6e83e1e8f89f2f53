package benchscale

import (
	"math"
	"testing"
)

func TestHistogramQuantile(t *testing.T) {
	// 10 observations: 4 up to 0.1, 4 more up to 0.5, 2 more up to 1.
	h := histogram{bounds: []float64{0.1, 0.5, 1, math.Inf(1)}, counts: []float64{4, 8, 10, 10}, count: 10}
	for _, tc := range []struct{ q, want float64 }{
		{0.2, 0.05}, // rank 2 of 4 in [0, 0.1]
		{0.5, 0.2},  // rank 5: 1 of 4 into [0.1, 0.5]
		{0.9, 0.75}, // rank 9: 1 of 2 into [0.5, 1]
		{1.0, 1},    // the last finite bound
	} {
		if got := h.quantile(tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	// The observations between two readings.
	earlier := histogram{bounds: h.bounds, counts: []float64{4, 4, 4, 4}, count: 4}
	if got := h.minus(earlier).quantile(0.5); math.Abs(got-0.4) > 1e-9 {
		t.Errorf("quantile(0.5) of the difference = %v, want 0.4", got)
	}
	if got := (histogram{}).quantile(0.5); !math.IsNaN(got) {
		t.Errorf("quantile of nothing = %v, want NaN", got)
	}
}

func TestPercentile(t *testing.T) {
	sorted := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct{ p, want float64 }{{50, 5}, {95, 10}, {10, 1}, {100, 10}} {
		if got := percentile(sorted, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %v", got)
	}
}

func TestRequestTotals(t *testing.T) {
	total, writes := requestTotals(map[string]float64{"GET": 10, "POST": 3, "PATCH": 2, "PUT": 1, "DELETE": 1})
	if total != 17 || writes != 7 {
		t.Errorf("total %v writes %v, want 17 and 7", total, writes)
	}
}
