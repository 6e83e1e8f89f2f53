package pipeline

import (
	"context"
	"errors"
	"testing"
)

func TestRewindCheckComparesTheServerWithTheCaches(t *testing.T) {
	failed := errors.New("no answer")
	for _, c := range []struct {
		name            string
		newest, current string
		newestErr       error
		currentErr      error
		rewound         bool
	}{
		{name: "the server ahead", newest: "120", current: "130"},
		{name: "the server at the caches", newest: "130", current: "130"},
		{name: "the server behind the caches", newest: "3487", current: "460", rewound: true},
		{name: "empty caches", newest: "", current: "460"},
		{name: "the server does not answer", newest: "3487", currentErr: failed},
		{name: "the caches do not answer", newestErr: failed, current: "460"},
		{name: "versions that do not compare", newest: "abc", current: "460"},
	} {
		t.Run(c.name, func(t *testing.T) {
			check := RewindCheck{
				Newest:  func(context.Context) (string, error) { return c.newest, c.newestErr },
				Current: func(context.Context) (string, error) { return c.current, c.currentErr },
			}
			err := check.compare(context.Background())
			if got := errors.Is(err, ErrRewound); got != c.rewound {
				t.Fatalf("compare = %v, want rewound %v", err, c.rewound)
			}
		})
	}
}
