package glanceclient

import (
	"fmt"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var samples []Sample
	for i := 1; i <= 100; i++ {
		s := Sample{Op: []string{"list", "download"}[i%2], Dur: time.Duration(i) * time.Millisecond}
		if i%25 == 0 {
			s.Err = fmt.Sprintf("failure %d", i)
		}
		samples = append(samples, s)
	}
	st := Summarize(samples)
	if st.Requests != 100 || st.Failed != 4 || st.FailedByOp["download"] != 2 || st.FailedByOp["list"] != 2 || st.ByOp["list"] != 50 || st.ByOp["download"] != 50 {
		t.Errorf("counts: %+v", st)
	}
	if st.P50 != 51*time.Millisecond || st.P99 != 100*time.Millisecond || st.Max != 100*time.Millisecond {
		t.Errorf("quantiles: p50 %s p99 %s max %s", st.P50, st.P99, st.Max)
	}
	if len(st.Errors) != 4 || st.Errors[0].Err != "failure 25" {
		t.Errorf("errors: %+v", st.Errors)
	}
	if empty := Summarize(nil); empty.Requests != 0 || empty.P99 != 0 {
		t.Errorf("no samples: %+v", empty)
	}
}
