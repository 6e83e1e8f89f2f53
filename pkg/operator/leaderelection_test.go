package operator

import (
	"strings"
	"testing"
	"time"
)

func TestLeaderElectionTimings(t *testing.T) {
	for _, tc := range []struct {
		name                string
		o                   Options
		lease, renew, retry time.Duration
		wantErr             string
	}{
		{name: "defaults", lease: DefaultLeaseDuration, renew: DefaultRenewDeadline, retry: DefaultRetryPeriod},
		{name: "set", o: Options{LeaseDuration: time.Minute, RenewDeadline: 40 * time.Second, RetryPeriod: 5 * time.Second},
			lease: time.Minute, renew: 40 * time.Second, retry: 5 * time.Second},
		{name: "a renew deadline as long as the lease", o: Options{RenewDeadline: 15 * time.Second},
			wantErr: "--leader-elect-lease-duration (15s) must be longer than --leader-elect-renew-deadline (15s)"},
		{name: "retries too slow for the deadline", o: Options{RetryPeriod: 9 * time.Second},
			wantErr: "--leader-elect-renew-deadline (10s) must be longer than 1.2 times --leader-elect-retry-period (9s)"},
		{name: "negative", o: Options{RetryPeriod: -time.Second}, wantErr: "must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lease, renew, retry, err := leaderElectionTimings(tc.o)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || lease != tc.lease || renew != tc.renew || retry != tc.retry {
				t.Errorf("got %s %s %s (%v), want %s %s %s", lease, renew, retry, err, tc.lease, tc.renew, tc.retry)
			}
		})
	}
}
