package metrics

import (
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// intervalSpan is how far ahead longestGap looks: a year holds every
// pattern of a five-field schedule but the 29th of February, whose gap the
// first run past the span still measures.
const intervalSpan = 366 * 24 * time.Hour

// maxMatchingDays bounds the walk: a year has at most 366 days a schedule
// runs on.
const maxMatchingDays = 400

// maxCachedSchedules bounds the memo: schedules are user input.
const maxCachedSchedules = 1024

// intervalEpoch is where every walk starts, so a schedule's interval is the
// same on every scrape and can be memoized. Schedules run in UTC: the
// CronJob sets no time zone.
var intervalEpoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// scheduleIntervals memoizes longestGap by schedule.
type scheduleIntervals struct {
	mu         sync.Mutex
	bySchedule map[string]time.Duration
}

// of is the longest gap between two runs of the cron schedule; false when it
// does not parse or never fires.
func (c *scheduleIntervals) of(schedule string) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.bySchedule[schedule]; ok {
		return d, d > 0
	}
	d := time.Duration(0)
	if s, err := cron.ParseStandard(schedule); err == nil {
		d = longestGap(s, intervalEpoch)
	}
	if c.bySchedule == nil {
		c.bySchedule = map[string]time.Duration{}
	}
	// Full: drop one entry, any, rather than all, so a scrape recomputes
	// only the schedules beyond the bound.
	for s := range c.bySchedule {
		if len(c.bySchedule) < maxCachedSchedules {
			break
		}
		delete(c.bySchedule, s)
	}
	c.bySchedule[schedule] = d
	return d, d > 0
}

// longestGap is the longest time between two consecutive runs of s in the
// year from start, 0 when it cannot tell: a purge is overdue after twice
// that, whatever the pattern (every 5 minutes between 3 and 4 o'clock has a
// 23-hour gap). Every day a five-field schedule runs on has the same times,
// so it walks days, not runs: the gap within a day, then from each day's
// last run to the next run.
func longestGap(s cron.Schedule, start time.Time) time.Duration {
	switch s := s.(type) {
	case cron.ConstantDelaySchedule:
		return s.Delay
	case *cron.SpecSchedule:
		times := dayTimes(s)
		if len(times) == 0 {
			return 0
		}
		var longest time.Duration
		for i := 1; i < len(times); i++ {
			longest = max(longest, times[i]-times[i-1])
		}
		run := s.Next(start)
		for range maxMatchingDays {
			if run.IsZero() {
				return 0
			}
			y, m, d := run.Date()
			last := time.Date(y, m, d, 0, 0, 0, 0, run.Location()).Add(times[len(times)-1])
			next := s.Next(last)
			if next.IsZero() {
				return 0
			}
			longest = max(longest, next.Sub(last))
			if next.Sub(start) >= intervalSpan {
				return longest
			}
			run = next
		}
	}
	return 0
}

// dayTimes are the times of day s runs at, from midnight, in order.
func dayTimes(s *cron.SpecSchedule) []time.Duration {
	var out []time.Duration
	for h := range 24 {
		for m := range 60 {
			if s.Hour&(1<<h) != 0 && s.Minute&(1<<m) != 0 {
				out = append(out, time.Duration(h)*time.Hour+time.Duration(m)*time.Minute)
			}
		}
	}
	return out
}
