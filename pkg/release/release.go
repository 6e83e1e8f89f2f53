// Package release knows OpenStack's release calendar as Glance uses it:
// YYYY.1 and YYYY.2 releases, their order, the single-next-release upgrade
// rule, the launch mode each release runs under, and the release an image tag
// was built for.
package release

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// MinYear is the first year a release can carry.
const MinYear = 2010

// Release is an OpenStack release: Year.Cycle, Cycle being 1 or 2.
type Release struct {
	Year  int
	Cycle int
}

// UWSGIFrom is the first release that runs glance-api under uWSGI.
var UWSGIFrom = Release{Year: 2026, Cycle: 1}

// Parse reads "YYYY.N" with N 1 or 2 and YYYY at least MinYear.
func Parse(s string) (Release, error) {
	year, cycle, ok := strings.Cut(s, ".")
	if !ok || len(year) != 4 || len(cycle) != 1 {
		return Release{}, fmt.Errorf("release %q is not of the form YYYY.1 or YYYY.2", s)
	}
	if strings.Trim(year, "0123456789") != "" || (cycle != "1" && cycle != "2") {
		return Release{}, fmt.Errorf("release %q is not of the form YYYY.1 or YYYY.2", s)
	}
	y, _ := strconv.Atoi(year) // four digits: cannot fail
	if y < MinYear {
		return Release{}, fmt.Errorf("release %q is older than %d.1, the first release of the YYYY.N scheme this operator knows", s, MinYear)
	}
	return Release{Year: y, Cycle: int(cycle[0] - '0')}, nil
}

// String formats the release as YYYY.N.
func (r Release) String() string { return fmt.Sprintf("%04d.%d", r.Year, r.Cycle) }

// Compare orders releases: negative when r is older than o, zero when equal,
// positive when newer.
func (r Release) Compare(o Release) int {
	if r.Year != o.Year {
		return r.Year - o.Year
	}
	return r.Cycle - o.Cycle
}

// Next is the release after r: 2025.2 → 2026.1 → 2026.2.
func (r Release) Next() Release {
	if r.Cycle == 1 {
		return Release{Year: r.Year, Cycle: 2}
	}
	return Release{Year: r.Year + 1, Cycle: 1}
}

// Step says how moving from one release to another relates to the
// single-next-release rule.
type Step int

const (
	// Same release: nothing to migrate.
	Same Step = iota
	// Upgrade to the single next release: the only forward move allowed.
	Upgrade
	// Skip jumps forward past the next release.
	Skip
	// Downgrade moves backwards.
	Downgrade
)

// StepBetween classifies the move from an installed release to a target.
func StepBetween(installed, target Release) Step {
	switch c := target.Compare(installed); {
	case c == 0:
		return Same
	case c < 0:
		return Downgrade
	case target == installed.Next():
		return Upgrade
	default:
		return Skip
	}
}

// LaunchMode is how glance-api runs.
type LaunchMode string

const (
	// Eventlet runs the glance-api console script (releases before 2026.1).
	Eventlet LaunchMode = "eventlet"
	// UWSGI runs glance-api under uWSGI (2026.1 and later).
	UWSGI LaunchMode = "uwsgi"
)

// LaunchModeOf returns the launch mode of a release string. An unparseable
// release falls back to eventlet, the mode every older image supports.
func LaunchModeOf(s string) LaunchMode {
	r, err := Parse(s)
	if err != nil || r.Compare(UWSGIFrom) < 0 {
		return Eventlet
	}
	return UWSGI
}

// tagPrefix matches a release at the start of an image tag, followed by the
// end of the tag or a separator: 2026.1, 2026.1-20260301, 2026.1.3, 2026.1_rc1.
var tagPrefix = regexp.MustCompile(`^(\d{4}\.[12])(?:$|[-._+])`)

// FromImageTag returns the release an image tag was built for, and false when
// the tag carries no release prefix (latest, a commit hash, 2026.10).
func FromImageTag(tag string) (Release, bool) {
	m := tagPrefix.FindStringSubmatch(tag)
	if m == nil {
		return Release{}, false
	}
	r, err := Parse(m[1])
	return r, err == nil
}
