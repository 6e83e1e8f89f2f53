package metrics

import (
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// intervalSpan is how far ahead longestGap looks: a year holds every
// pattern of a five-field schedule but the 29th of February, whose gap the
// first activation past the span still measures.
const intervalSpan = 366 * 24 * time.Hour

// maxActivations bounds the walk of a schedule that fires every minute: the
// first 5000 of its runs span three days, past any daily pattern.
const maxActivations = 5000

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
	if c.bySchedule == nil || len(c.bySchedule) >= maxCachedSchedules {
		c.bySchedule = map[string]time.Duration{}
	}
	c.bySchedule[schedule] = d
	return d, d > 0
}

// longestGap is the longest time between two consecutive activations of s
// in the year from start: a purge is overdue after twice that, whatever
// the pattern (every 5 minutes between 3 and 4 o'clock has a 23-hour gap).
func longestGap(s cron.Schedule, start time.Time) time.Duration {
	var longest time.Duration
	prev := s.Next(start)
	for i := 0; i < maxActivations && !prev.IsZero(); i++ {
		next := s.Next(prev)
		if next.IsZero() {
			break
		}
		longest = max(longest, next.Sub(prev))
		if next.Sub(start) >= intervalSpan {
			break
		}
		prev = next
	}
	return longest
}
