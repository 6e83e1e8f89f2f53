package benchscale

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// matches reports whether m carries every label of want.
func matches(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(want)
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// gauge is the value of a gauge without labels; 0 when absent.
func gauge(families map[string]*dto.MetricFamily, name string) float64 {
	var v float64
	for _, m := range families[name].GetMetric() {
		v += m.GetGauge().GetValue()
	}
	return v
}

// requestsByMethod sums a client-go request counter
// (rest_client_requests_total) by HTTP method, for the requests to host.
func requestsByMethod(families map[string]*dto.MetricFamily, host string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range families["rest_client_requests_total"].GetMetric() {
		if label(m, "host") == host {
			out[label(m, "method")] += m.GetCounter().GetValue()
		}
	}
	return out
}

// histogram is the cumulative buckets of one histogram, summed over the
// series a selection matched.
type histogram struct {
	bounds []float64
	counts []float64 // cumulative, per bound
	count  float64
	sum    float64
}

// histogramOf sums the series of a histogram family matching want.
func histogramOf(families map[string]*dto.MetricFamily, name string, want map[string]string) histogram {
	var h histogram
	byBound := map[float64]float64{}
	for _, m := range families[name].GetMetric() {
		if !matches(m, want) {
			continue
		}
		for _, b := range m.GetHistogram().GetBucket() {
			byBound[b.GetUpperBound()] += float64(b.GetCumulativeCount())
		}
		h.count += float64(m.GetHistogram().GetSampleCount())
		h.sum += m.GetHistogram().GetSampleSum()
	}
	for b := range byBound {
		h.bounds = append(h.bounds, b)
	}
	slices.Sort(h.bounds)
	for _, b := range h.bounds {
		h.counts = append(h.counts, byBound[b])
	}
	return h
}

// histogramBetween is the observations of a histogram between two
// readings of the metrics.
func histogramBetween(before, after map[string]*dto.MetricFamily, name string, want map[string]string) histogram {
	return histogramOf(after, name, want).minus(histogramOf(before, name, want))
}

// millis is h's p50 and p95, in milliseconds.
func (h histogram) millis() Distribution {
	return Distribution{P50: millis(h.quantile(0.5)), P95: millis(h.quantile(0.95))}
}

// minus is h with an earlier reading of the same histogram taken away:
// the observations between the two.
func (h histogram) minus(earlier histogram) histogram {
	out := histogram{bounds: h.bounds, count: h.count - earlier.count, sum: h.sum - earlier.sum}
	for i, b := range h.bounds {
		c := h.counts[i]
		if j := slices.Index(earlier.bounds, b); j >= 0 {
			c -= earlier.counts[j]
		}
		out.counts = append(out.counts, c)
	}
	return out
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: linear within the bucket the rank falls in. NaN without samples.
func (h histogram) quantile(q float64) float64 {
	if h.count == 0 || len(h.bounds) == 0 {
		return math.NaN()
	}
	rank := q * h.count
	lower, below := 0.0, 0.0
	for i, upper := range h.bounds {
		if h.counts[i] >= rank {
			if math.IsInf(upper, 1) {
				return lower
			}
			inBucket := h.counts[i] - below
			if inBucket == 0 {
				return upper
			}
			return lower + (upper-lower)*(rank-below)/inBucket
		}
		lower, below = upper, h.counts[i]
	}
	return lower
}

// processStats are a process's CPU seconds and resident memory.
type processStats struct {
	CPUSeconds float64
	RSSKiB     int64
	HWMKiB     int64
}

// readProcess reads /proc of pid: utime+stime, VmRSS and VmHWM.
func readProcess(pid int) (processStats, error) {
	var s processStats
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 13 {
		return s, fmt.Errorf("/proc/%d/stat: %d fields after the command", pid, len(fields))
	}
	// utime and stime are fields 14 and 15, in clock ticks; Linux's
	// USER_HZ is 100 on every architecture Go runs on.
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, fields[11], fields[12])
	}
	s.CPUSeconds = (utime + stime) / 100
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch {
		case key != "VmRSS" && key != "VmHWM":
			continue
		case err != nil:
			return s, fmt.Errorf("/proc/%d/status %s %q: %w", pid, key, value, err)
		case key == "VmRSS":
			s.RSSKiB = kib
		default:
			s.HWMKiB = kib
		}
	}
	return s, nil
}

// percentile is the p-th percentile (0-100) of sorted values, by the
// nearest rank; 0 for none.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
