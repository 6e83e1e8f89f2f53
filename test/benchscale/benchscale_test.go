package benchscale

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBenchScaleSmoke runs the benchmark at three Glances with short waits: the
// program works end to end and writes its report. It asserts that every
// figure was taken, never what it is.
func TestBenchScaleSmoke(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	report, err := Run(ctx, Options{Counts: []int{3}, Dir: dir, Idle: 2 * time.Second, UnrelatedSecrets: 50, Timeout: 5 * time.Minute, Floor: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := report.Write(dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatalf("%s: %v", JSONFile, err)
	}
	if len(back.Results) != 1 {
		t.Fatalf("%d results, want 1", len(back.Results))
	}
	r := back.Results[0]
	// The audit log's counts: the rows add up to the totals, and the
	// manager wrote while converging.
	converging, writes := 0, 0
	for _, row := range r.Requests {
		converging += row.Converging
		if slices.Contains(writeVerbs, row.Verb) {
			writes += row.Converging
		}
	}
	for name, taken := range map[string]bool{
		"audit requests by verb and resource": converging > 0 && writes > 0 &&
			math.Abs(float64(converging)-r.RequestsPerGlance*3) < 1e-6 && math.Abs(float64(writes)-r.WritesPerGlance*3) < 1e-6,
		"client-side requests": r.Client.RequestsPerGlance > 0 && r.Client.WritesPerGlance > 0,
		"glances":              r.Glances == 3,
		"all Ready":            r.AllReadySeconds > 0 && r.ReadySeconds.Max == r.AllReadySeconds,
		"floor":                r.FloorSeconds > 0 && r.FloorReadySeconds.P50 > 0 && r.FloorReadySeconds.P50 <= r.FloorSeconds,
		"requests per Glance":  r.RequestsPerGlance > 0 && r.WritesPerGlance > 0,
		"passes":               r.Passes > 0 && r.PassMillis.P95 > 0 && r.PassSecondsPerGlance > 0 && r.QueueWaitMillis > 0,
		"backend passes":       r.BackendPassMillis.P50 > 0,
		"API latency":          r.APIMillis.P95 > 0 && !math.IsNaN(r.ThrottleMillis.P95),
		"steps":                len(r.StepMillisP95) > 0,
		"CPU":                  r.ManagerCPUSeconds > 0,
		"RSS":                  r.RSSKiB > 0 && r.HWMKiB >= r.RSSKiB,
		"RSS after unrelated":  r.RSSAfterUnrelated > 0 && !math.IsNaN(r.UnrelatedBytesEach),
		"idle writes measured": !math.IsNaN(r.IdleWritesPerMinute),
		"CPU profile":          fileSize(r.CPUProfile) > 0 && r.ProfileSeconds > 0 && strings.Contains(r.ProfileTop, "flat%"),
	} {
		if !taken {
			t.Errorf("%s not taken: %+v", name, r)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| 3 Glances |") || !strings.Contains(string(md), "all Ready, from the start of the apply") ||
		!strings.Contains(string(md), "### Requests by verb and resource") || !strings.Contains(string(md), "### Where the manager's CPU goes") {
		t.Errorf("%s:\n%s", MarkdownFile, md)
	}
	svg, err := os.ReadFile(filepath.Join(dir, SVGFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(svg), "<svg") || !strings.Contains(string(svg), "<polyline") {
		t.Errorf("%s is no plot:\n%s", SVGFile, svg)
	}
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
