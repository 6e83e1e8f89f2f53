package metrics

import (
	"fmt"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

func TestLongestGap(t *testing.T) {
	for _, c := range []struct {
		schedule string
		want     time.Duration
	}{
		{"0 3 * * *", 24 * time.Hour},
		{"*/10 * * * *", 10 * time.Minute},
		// Every 5 minutes within one hour a day: the gap to the next day
		// is what a missed purge is measured against.
		{"*/5 3 * * *", 23*time.Hour + 5*time.Minute},
		{"0 3 * * 1", 7 * 24 * time.Hour},
		{"0 3 * * 1,3", 5 * 24 * time.Hour},
		{"0 0 1 * *", 31 * 24 * time.Hour},
		// Only in leap years: the walk goes past its year to measure it.
		{"0 0 29 2 *", (365*4 + 1) * 24 * time.Hour},
		{"* * * * *", time.Minute},
		{"*/30 * * * *", 30 * time.Minute},
		{"15 * * * *", time.Hour},
		// Every minute of the first week of each month: the gap is from
		// the 7th to the 1st, 24 days in a 31-day month.
		{"* * 1-7 * *", 24*24*time.Hour + time.Minute},
		{"0 3,15 * * 1-5", 3*24*time.Hour - 12*time.Hour},
		{"@every 90m", 90 * time.Minute},
	} {
		s, err := cron.ParseStandard(c.schedule)
		if err != nil {
			t.Fatalf("%q: %v", c.schedule, err)
		}
		if got := longestGap(s, intervalEpoch); got != c.want {
			t.Errorf("longestGap(%q) = %v, want %v", c.schedule, got, c.want)
		}
	}
}

func TestScheduleIntervalsMemoizeAndRefuse(t *testing.T) {
	var c scheduleIntervals
	if d, ok := c.of("0 3 * * *"); !ok || d != 24*time.Hour {
		t.Errorf("of(daily) = %v, %v", d, ok)
	}
	if _, ok := c.of("not a schedule"); ok {
		t.Error("an unparsable schedule has an interval")
	}
	if len(c.bySchedule) != 2 {
		t.Errorf("memo holds %d schedules, want 2", len(c.bySchedule))
	}
	for i := range maxCachedSchedules + 5 {
		c.of(fmt.Sprintf("%d %d * * *", i%60, i/60%24))
	}
	if len(c.bySchedule) > maxCachedSchedules {
		t.Errorf("memo holds %d schedules, more than its bound %d", len(c.bySchedule), maxCachedSchedules)
	}
}
