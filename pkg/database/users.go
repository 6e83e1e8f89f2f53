package database

import (
	"fmt"
	"strings"
)

// Slot is one of the two database users a managed Glance alternates
// between. MariaDB holds one password per user, so a rotation that changed
// the password of the user the pods connect as would refuse the outgoing
// pods' new connections until the roll replaced them. Instead the new
// password goes to the other slot's user, the pods roll onto it once it is
// Ready, and the old user is dropped when no pod connects as it anymore.
type Slot string

// The slots: A is the user named in the credentials Secret, B that name
// with SlotBSuffix.
const (
	SlotA Slot = "a"
	SlotB Slot = "b"
)

// SlotBSuffix makes slot B's database user, and the name of its User and
// Grant, from slot A's. A dot never ends a Glance's name (a DNS-1035 label),
// so slot B's objects can never be another Glance's slot A objects in the
// same namespace; CheckUsername refuses a user that ends in it, so slot B's
// user can never be another Glance's user on the same MariaDB.
const SlotBSuffix = ".b"

// MaxUsernameLength is the longest user name MariaDB takes.
const MaxUsernameLength = 80

// CheckUsername says why user cannot be slot A's user of a Glance whose
// users the operator makes; nil when it can.
func CheckUsername(user string) error {
	switch {
	case strings.HasSuffix(user, SlotBSuffix):
		return fmt.Errorf("%q ends in %q, which the operator keeps for the second user of each Glance (that of %q); choose a user that does not end in it",
			user, SlotBSuffix, strings.TrimSuffix(user, SlotBSuffix))
	case len(user)+len(SlotBSuffix) > MaxUsernameLength:
		return fmt.Errorf("%q is %d characters long; MariaDB takes %d, and the operator's second user adds %q, so at most %d",
			user, len(user), MaxUsernameLength, SlotBSuffix, MaxUsernameLength-len(SlotBSuffix))
	}
	return nil
}

// Other is the other slot.
func (s Slot) Other() Slot {
	if s == SlotB {
		return SlotA
	}
	return SlotB
}

// Username is the slot's database user, given the one the credentials
// Secret names.
func (s Slot) Username(user string) string {
	if s == SlotB {
		return user + SlotBSuffix
	}
	return user
}

// SlotState is what the cluster holds of a slot.
type SlotState struct {
	// Exists is true while any of its objects (password Secret, User,
	// Grant) exists, a deleted one included until it is gone.
	Exists bool
	// Current is true when its password Secret holds the credentials
	// Secret's password, for its user.
	Current bool
	// Ready is true when its User and Grant are Ready.
	Ready bool
}

// UsersObservation is what PlanUsers reads.
type UsersObservation struct {
	// Active is the slot the live DSN names; empty before the first DSN.
	Active Slot
	A, B   SlotState
	// Settled is true when no pod or Job may still connect with another
	// DSN than the live one: the Deployment has rolled out onto it, the old
	// pods' grace is over, and no schema Job runs.
	Settled bool
}

func (o UsersObservation) slot(s Slot) SlotState {
	if s == SlotB {
		return o.B
	}
	return o.A
}

// UsersPlan is what the DatabaseUsers step does.
type UsersPlan struct {
	// Active is the slot the DSN names.
	Active Slot
	// Provision is the slot whose password Secret gets the credentials
	// Secret's password and whose User and Grant are applied; empty for
	// none. A slot is provisioned only when it does not exist or already
	// holds that password, so a live user's password never changes.
	Provision Slot
	// Retire is the slot whose User, Grant and password Secret are deleted;
	// empty for none.
	Retire Slot
	// Waiting says why the DSN does not name the credentials Secret's
	// password yet; empty when it does.
	Waiting string
}

// PlanUsers decides which slot the DSN names and what happens to each
// slot's user.
func PlanUsers(o UsersObservation) UsersPlan {
	active := o.Active
	if active == "" {
		// The first DSN, or the first since the Glance had a single user
		// (slot A, whose password Secret the step now writes): A, unless
		// only B is there, Ready with the password.
		active = SlotA
		if b := o.B; !o.A.Exists && b.Exists && b.Current && b.Ready {
			active = SlotB
		}
	}
	x, y := active, active.Other()
	xs, ys := o.slot(x), o.slot(y)
	if xs.Current || !xs.Exists {
		// No rotation: keep the active slot, and drop the other once
		// nothing connects as it.
		plan := UsersPlan{Active: x, Provision: x}
		if ys.Exists && o.Settled {
			plan.Retire = y
		}
		return plan
	}
	// A rotation: the active user keeps its password until the pods left it.
	switch {
	case ys.Exists && ys.Current && ys.Ready:
		return UsersPlan{Active: y, Provision: y}
	case ys.Exists && ys.Current:
		return UsersPlan{Active: x, Provision: y, Waiting: fmt.Sprintf("waiting for database user slot %s to be Ready with the new password", y)}
	case ys.Exists && o.Settled:
		// A user of an older password: drop it, then make it anew.
		return UsersPlan{Active: x, Retire: y, Waiting: fmt.Sprintf("dropping database user slot %s, which holds an older password, to make it anew with the new one", y)}
	case ys.Exists:
		return UsersPlan{Active: x, Waiting: fmt.Sprintf("a new database password waits until no pod connects as database user slot %s, from the previous rotation", y)}
	default:
		return UsersPlan{Active: x, Provision: y, Waiting: fmt.Sprintf("waiting for database user slot %s to be Ready with the new password", y)}
	}
}
