package release

import (
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Release
		wantErr string
	}{
		{in: "2025.2", want: Release{2025, 2}},
		{in: "2026.1", want: Release{2026, 1}},
		{in: "2010.1", want: Release{2010, 1}},
		{in: "2009.2", wantErr: "older than 2010.1"},
		{in: "2025.3", wantErr: "not of the form"},
		{in: "2025.0", wantErr: "not of the form"},
		{in: "2025", wantErr: "not of the form"},
		{in: "25.1", wantErr: "not of the form"},
		{in: "2025.12", wantErr: "not of the form"},
		{in: "20a5.1", wantErr: "not of the form"},
		{in: "+025.1", wantErr: "not of the form"},
		{in: "", wantErr: "not of the form"},
		{in: "zed", wantErr: "not of the form"},
	} {
		got, err := Parse(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Parse(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if got.String() != tc.in {
			t.Errorf("Parse(%q).String() = %q", tc.in, got.String())
		}
	}
}

func TestOrderAndNext(t *testing.T) {
	in := []Release{{2026, 2}, {2025, 2}, {2026, 1}, {2024, 1}, {2025, 1}}
	slices.SortFunc(in, Release.Compare)
	want := []Release{{2024, 1}, {2025, 1}, {2025, 2}, {2026, 1}, {2026, 2}}
	if !slices.Equal(in, want) {
		t.Fatalf("sorted %v, want %v", in, want)
	}
	for i := 1; i+1 < len(want); i++ {
		if want[i].Next() != want[i+1] {
			t.Errorf("%v.Next() = %v, want %v", want[i], want[i].Next(), want[i+1])
		}
	}
	if (Release{2025, 2}).Next() != (Release{2026, 1}) || (Release{2026, 1}).Next() != (Release{2026, 2}) {
		t.Fatal("2025.2 → 2026.1 → 2026.2 broken")
	}
}

func TestStepBetween(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		want     Step
	}{
		{"2025.2", "2025.2", Same},
		{"2025.2", "2026.1", Upgrade},
		{"2026.1", "2026.2", Upgrade},
		{"2025.1", "2025.2", Upgrade},
		{"2025.2", "2026.2", Skip},
		{"2025.1", "2026.1", Skip},
		{"2024.2", "2026.1", Skip},
		{"2026.1", "2025.2", Downgrade},
		{"2026.2", "2025.1", Downgrade},
	} {
		from, _ := Parse(tc.from)
		to, _ := Parse(tc.to)
		if got := StepBetween(from, to); got != tc.want {
			t.Errorf("StepBetween(%s, %s) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}

func TestLaunchModeOf(t *testing.T) {
	for in, want := range map[string]LaunchMode{
		"2025.1": Eventlet, "2025.2": Eventlet, "2026.1": UWSGI, "2026.2": UWSGI, "2030.1": UWSGI,
		"": Eventlet, "2026.3": Eventlet, "garbage": Eventlet, "2009.1": Eventlet,
	} {
		if got := LaunchModeOf(in); got != want {
			t.Errorf("LaunchModeOf(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestFromImageTag(t *testing.T) {
	for _, tc := range []struct {
		tag  string
		want string // "" = no release prefix
	}{
		{"2026.1", "2026.1"},
		{"2026.1-20260301", "2026.1"},
		{"2026.1.3", "2026.1"},
		{"2025.2_rc1", "2025.2"},
		{"2025.2+build.7", "2025.2"},
		{"latest", ""},
		{"2026.10", ""},
		{"2026.3", ""},
		{"2026", ""},
		{"v2026.1", ""},
		{"20261", ""},
		{"2009.1", ""},
		{"abc123", ""},
	} {
		got, ok := FromImageTag(tc.tag)
		switch {
		case tc.want == "" && ok:
			t.Errorf("FromImageTag(%q) = %v, want no release", tc.tag, got)
		case tc.want != "" && (!ok || got.String() != tc.want):
			t.Errorf("FromImageTag(%q) = %v, %v; want %s", tc.tag, got, ok, tc.want)
		}
	}
}
