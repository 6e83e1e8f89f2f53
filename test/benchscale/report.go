package benchscale

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Report files, in the report directory.
const (
	JSONFile     = "bench-scale.json"
	MarkdownFile = "bench-scale.md"
	SVGFile      = "bench-scale.svg"
)

// Write writes the report as JSON, a Markdown table and an SVG plot of the
// time to all-Ready and the manager's RSS against N, into dir.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	for name, content := range map[string][]byte{
		JSONFile:     append(data, '\n'),
		MarkdownFile: []byte(r.Markdown()),
		SVGFile:      []byte(r.SVG()),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Markdown is the report as a table, a column per count.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Taken %s on %d CPUs; %s.", r.Taken.Format("2006-01-02 15:04 UTC"), r.CPUs, r.Replica)
	if len(r.ManagerArgs) > 0 {
		fmt.Fprintf(&b, " The manager ran with %s.", strings.Join(r.ManagerArgs, " "))
	}
	b.WriteString("\n\n")
	b.WriteString("| figure |")
	for _, res := range r.Results {
		fmt.Fprintf(&b, " %d Glances |", res.Glances)
	}
	b.WriteString("\n|---|")
	for range r.Results {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	row := func(name string, cell func(Result) string) {
		fmt.Fprintf(&b, "| %s |", name)
		for _, res := range r.Results {
			fmt.Fprintf(&b, " %s |", cell(res))
		}
		b.WriteString("\n")
	}
	row("all Ready, from the start of the apply", func(x Result) string { return fmt.Sprintf("%.1f s", x.AllReadySeconds) })
	row("control-plane floor (the same workloads applied directly)", func(x Result) string {
		if x.FloorSeconds == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f s (all Ready at %.2f×); per Glance p50 %.1f s", x.FloorSeconds, x.AllReadySeconds/x.FloorSeconds, x.FloorReadySeconds.P50)
	})
	row("per-Glance time to Ready p50 / p95 / max", func(x Result) string {
		return fmt.Sprintf("%.1f / %.1f / %.1f s", x.ReadySeconds.P50, x.ReadySeconds.P95, x.ReadySeconds.Max)
	})
	row("Glance reconcile pass p50 / p95", func(x Result) string {
		return fmt.Sprintf("%.0f / %.0f ms", x.PassMillis.P50, x.PassMillis.P95)
	})
	row("passes per Glance, and the workers' time on each", func(x Result) string {
		return fmt.Sprintf("%.1f, %.0f ms", x.Passes, x.PassSecondsPerGlance*1000)
	})
	row("mean wait in the Glance work queue", func(x Result) string { return fmt.Sprintf("%.1f ms", x.QueueWaitMillis) })
	row("manager's API requests p50 / p95, and its client-side rate limit's wait p95", func(x Result) string {
		return fmt.Sprintf("%.1f / %.1f ms, wait %.1f ms", x.APIMillis.P50, x.APIMillis.P95, x.ThrottleMillis.P95)
	})
	row("GlanceBackend reconcile pass p50 / p95", func(x Result) string {
		return fmt.Sprintf("%.1f / %.1f ms", x.BackendPassMillis.P50, x.BackendPassMillis.P95)
	})
	row("slowest step p95", func(x Result) string {
		step, ms := slowest(x.StepMillisP95)
		if step == "" {
			return "-"
		}
		return fmt.Sprintf("%s %.0f ms", step, ms)
	})
	row("API requests / writes per Glance while converging", func(x Result) string {
		return fmt.Sprintf("%.1f / %.1f", x.RequestsPerGlance, x.WritesPerGlance)
	})
	row("requests answered 4xx/5xx per Glance while converging", func(x Result) string { return fmt.Sprintf("%.1f", x.FailedPerGlance) })
	row("requests / writes per idle minute", func(x Result) string {
		return fmt.Sprintf("%.0f / %.0f", x.IdleRequestsPerMinute, x.IdleWritesPerMinute)
	})
	row("client-go's count: requests / writes per Glance while converging", func(x Result) string {
		return fmt.Sprintf("%.1f / %.1f", x.Client.RequestsPerGlance, x.Client.WritesPerGlance)
	})
	row("client-go's count: requests / writes per idle minute", func(x Result) string {
		return fmt.Sprintf("%.0f / %.0f", x.Client.IdleRequestsPerMinute, x.Client.IdleWritesPerMinute)
	})
	row("manager CPU while converging", func(x Result) string { return fmt.Sprintf("%.1f s", x.ManagerCPUSeconds) })
	row("manager RSS / high-water mark", func(x Result) string {
		return fmt.Sprintf("%.1f / %.1f MiB", float64(x.RSSKiB)/1024, float64(x.HWMKiB)/1024)
	})
	row("RSS and heap growth per unrelated 2 KiB Secret", func(x Result) string {
		if x.UnrelatedSecrets == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f B, heap %.0f B (%d Secrets)", x.UnrelatedBytesEach, x.UnrelatedHeapBytesEach, x.UnrelatedSecrets)
	})
	b.WriteString("\nAPI requests are the manager's own, counted by the API server from its audit log of the manager's ServiceAccount; " +
		"writes are create, update, patch, delete and deletecollection; a watch is one request, counted when it is opened. " +
		"client-go's count is the manager's rest_client_requests_total by HTTP method (a watch is a GET). " +
		"Pass times are estimated from the histograms' buckets.\n")
	r.requestsTable(&b)
	if last := r.Results[len(r.Results)-1]; last.ProfileTop != "" {
		fmt.Fprintf(&b, "\n### Where the manager's CPU goes at %d Glances\n\n", last.Glances)
		fmt.Fprintf(&b, "`go tool pprof -top` of its CPU profile over the first %d s of the apply (the floor, rounded up; `%s` in the count's directory):\n\n", last.ProfileSeconds, profileFile)
		b.WriteString("```text\n" + last.ProfileTop + "\n```\n")
	}
	return b.String()
}

// requestsTable is the manager's requests by verb and resource, a column
// per count: per Glance while converging, and per idle minute.
func (r *Report) requestsTable(b *strings.Builder) {
	type key struct{ verb, resource string }
	var keys []key
	seen := map[key]bool{}
	cells := make([]map[key]RequestRow, len(r.Results))
	for i, res := range r.Results {
		cells[i] = map[key]RequestRow{}
		for _, row := range res.Requests {
			k := key{row.Verb, row.Resource}
			cells[i][k] = row
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		return
	}
	// The largest count's order: what dominates at scale comes first.
	last := cells[len(cells)-1]
	slices.SortStableFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(last[b].PerGlance, last[a].PerGlance), cmp.Compare(last[b].IdlePerMinute, last[a].IdlePerMinute))
	})
	b.WriteString("\n### Requests by verb and resource\n\n")
	b.WriteString("Per Glance while converging / per idle minute, counted by the API server; a watch counts once, when it is opened, however long it stays open.\n\n")
	b.WriteString("| verb | resource |")
	for _, res := range r.Results {
		fmt.Fprintf(b, " %d Glances |", res.Glances)
	}
	b.WriteString("\n|---|---|")
	for range r.Results {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, k := range keys {
		fmt.Fprintf(b, "| %s | %s |", k.verb, k.resource)
		for i := range r.Results {
			row, ok := cells[i][k]
			if !ok {
				b.WriteString(" - |")
				continue
			}
			fmt.Fprintf(b, " %s / %s |", short(row.PerGlance), short(row.IdlePerMinute))
		}
		b.WriteString("\n")
	}
}

// short prints a count with the precision it needs: whole numbers bare,
// small fractions to two places.
func short(v float64) string {
	switch {
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case v < 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

// slowest is the step with the largest p95.
func slowest(p95 map[string]float64) (string, float64) {
	steps := make([]string, 0, len(p95))
	for s := range p95 {
		steps = append(steps, s)
	}
	slices.Sort(steps)
	best, ms := "", -1.0
	for _, s := range steps {
		if p95[s] > ms {
			best, ms = s, p95[s]
		}
	}
	return best, ms
}

// SVG plots the time to all-Ready (left axis) and the manager's RSS (right
// axis) against N, on a logarithmic N axis when the counts span a decade.
func (r *Report) SVG() string {
	const w, h, pad = 640.0, 360.0, 60.0
	results := slices.Clone(r.Results)
	slices.SortFunc(results, func(a, b Result) int { return a.Glances - b.Glances })
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="20" text-anchor="middle" font-size="14">time to all Ready and manager RSS against Glances</text>`+"\n", w/2)
	if len(results) == 0 {
		b.WriteString("</svg>\n")
		return b.String()
	}
	minN, maxN := float64(results[0].Glances), float64(results[len(results)-1].Glances)
	logScale := maxN/minN >= 10
	x := func(n int) float64 {
		if maxN == minN {
			return w / 2
		}
		if logScale {
			return pad + (w-2*pad)*(math.Log10(float64(n))-math.Log10(minN))/(math.Log10(maxN)-math.Log10(minN))
		}
		return pad + (w-2*pad)*(float64(n)-minN)/(maxN-minN)
	}
	maxT, maxR := 0.0, 0.0
	for _, res := range results {
		maxT = max(maxT, res.AllReadySeconds)
		maxR = max(maxR, float64(res.RSSKiB)/1024)
	}
	y := func(v, top float64) float64 {
		if top == 0 {
			return h - pad
		}
		return h - pad - (h-2*pad)*v/top
	}
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", pad, h-pad, w-pad, h-pad)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", pad, pad, pad, h-pad)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", w-pad, pad, w-pad, h-pad)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">Glances%s</text>`+"\n", w/2, h-pad+36, map[bool]string{true: " (log scale)"}[logScale])
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="#1f77b4">all Ready, s (max %.1f)</text>`+"\n", pad, pad-10, maxT)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end" fill="#d62728">RSS, MiB (max %.1f)</text>`+"\n", w-pad, pad-10, maxR)
	series := func(color string, value func(Result) float64, top float64) {
		var pts []string
		for _, res := range results {
			px, py := x(res.Glances), y(value(res), top)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px, py, color)
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), color)
	}
	series("#1f77b4", func(x Result) float64 { return x.AllReadySeconds }, maxT)
	series("#d62728", func(x Result) float64 { return float64(x.RSSKiB) / 1024 }, maxR)
	for _, res := range results {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%d</text>`+"\n", x(res.Glances), h-pad+16, res.Glances)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
