package database

import (
	"strings"
	"testing"
)

func TestPlanUsers(t *testing.T) {
	live := SlotState{Exists: true, Current: true, Ready: true}
	stale := SlotState{Exists: true, Ready: true}
	for _, c := range []struct {
		name string
		obs  UsersObservation
		want UsersPlan
		// waits is a word of the waiting message; empty when the DSN names
		// the new password.
		waits string
	}{
		{name: "first install", obs: UsersObservation{}, want: UsersPlan{Active: SlotA, Provision: SlotA}},
		// Its User follows the credentials Secret itself, so it holds the
		// password.
		{name: "single-user Glance upgraded", obs: UsersObservation{A: live}, want: UsersPlan{Active: SlotA, Provision: SlotA}},
		{name: "DSN lost during a rotation", obs: UsersObservation{A: stale}, want: UsersPlan{Active: SlotA, Provision: SlotB}, waits: "Ready"},
		{name: "steady", obs: UsersObservation{Active: SlotA, A: live, Settled: true}, want: UsersPlan{Active: SlotA, Provision: SlotA}},
		{name: "rotation provisions the other slot", obs: UsersObservation{Active: SlotA, A: stale, Settled: true},
			want: UsersPlan{Active: SlotA, Provision: SlotB}, waits: "Ready"},
		{name: "the other slot not Ready yet", obs: UsersObservation{Active: SlotA, A: stale, B: SlotState{Exists: true, Current: true}, Settled: true},
			want: UsersPlan{Active: SlotA, Provision: SlotB}, waits: "Ready"},
		{name: "the other slot Ready: switch", obs: UsersObservation{Active: SlotA, A: stale, B: live, Settled: true},
			want: UsersPlan{Active: SlotB, Provision: SlotB}},
		{name: "rolling onto B keeps A", obs: UsersObservation{Active: SlotB, A: stale, B: live},
			want: UsersPlan{Active: SlotB, Provision: SlotB}},
		{name: "rolled onto B drops A", obs: UsersObservation{Active: SlotB, A: stale, B: live, Settled: true},
			want: UsersPlan{Active: SlotB, Provision: SlotB, Retire: SlotA}},
		{name: "a rotation during the roll waits", obs: UsersObservation{Active: SlotB, A: stale, B: stale},
			want: UsersPlan{Active: SlotB}, waits: "previous rotation"},
		{name: "after the roll the older user is dropped first", obs: UsersObservation{Active: SlotB, A: stale, B: stale, Settled: true},
			want: UsersPlan{Active: SlotB, Retire: SlotA}, waits: "anew"},
		{name: "a standby of an older password is dropped", obs: UsersObservation{Active: SlotA, A: stale, B: SlotState{Exists: true}, Settled: true},
			want: UsersPlan{Active: SlotA, Retire: SlotB}, waits: "anew"},
		{name: "only B, DSN lost", obs: UsersObservation{B: live}, want: UsersPlan{Active: SlotB, Provision: SlotB}},
		{name: "back to A", obs: UsersObservation{Active: SlotB, A: live, B: stale, Settled: true},
			want: UsersPlan{Active: SlotA, Provision: SlotA}},
	} {
		got := PlanUsers(c.obs)
		waiting := got.Waiting
		got.Waiting = ""
		if got != c.want {
			t.Errorf("%s: plan %+v, want %+v", c.name, got, c.want)
		}
		if (c.waits == "") != (waiting == "") || !strings.Contains(waiting, c.waits) {
			t.Errorf("%s: waiting %q, want one with %q", c.name, waiting, c.waits)
		}
	}
}

// A live user's password never changes: whatever the observation, the
// provisioned slot is one that does not exist or already holds the
// password, and the retired one is neither the active slot nor one the
// pods may still connect as.
func TestPlanUsersNeverChangesALiveUser(t *testing.T) {
	states := []SlotState{{}, {Exists: true}, {Exists: true, Ready: true}, {Exists: true, Current: true}, {Exists: true, Current: true, Ready: true}}
	for _, active := range []Slot{"", SlotA, SlotB} {
		for _, a := range states {
			for _, b := range states {
				for _, settled := range []bool{false, true} {
					o := UsersObservation{Active: active, A: a, B: b, Settled: settled}
					p := PlanUsers(o)
					if p.Provision != "" {
						if s := o.slot(p.Provision); s.Exists && !s.Current {
							t.Errorf("%+v: provisions slot %s, which holds another password", o, p.Provision)
						}
					}
					if p.Retire != "" && (p.Retire == p.Active || p.Retire == p.Provision || !settled) {
						t.Errorf("%+v: retires slot %s (plan %+v)", o, p.Retire, p)
					}
					if p.Active != active && active != "" {
						if s := o.slot(p.Active); !s.Current || !s.Ready {
							t.Errorf("%+v: switches to slot %s, which is not Ready with the password", o, p.Active)
						}
					}
				}
			}
		}
	}
}

// Slot B's user is slot A's with SlotBSuffix: a slot A user that ends in it
// could be another Glance's slot B user, and one too long for it leaves no
// room for the suffix.
func TestCheckUsername(t *testing.T) {
	for _, c := range []struct {
		user  string
		fails string
	}{
		{"glance", ""},
		{"glance-b", ""},
		{"glance.bb", ""},
		{"glance.b", `ends in ".b"`},
		{strings.Repeat("u", MaxUsernameLength-len(SlotBSuffix)), ""},
		{strings.Repeat("u", MaxUsernameLength-len(SlotBSuffix)+1), "at most 78"},
	} {
		err := CheckUsername(c.user)
		if (err == nil) != (c.fails == "") || (err != nil && !strings.Contains(err.Error(), c.fails)) {
			t.Errorf("CheckUsername(%q) = %v, want an error saying %q", c.user, err, c.fails)
		}
		if err == nil && strings.TrimSuffix(SlotB.Username(c.user), SlotBSuffix) != c.user {
			t.Errorf("slot b's user of %q does not lead back to it", c.user)
		}
	}
}
