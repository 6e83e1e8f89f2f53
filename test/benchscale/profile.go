package benchscale

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"
)

// profileFile is where, in a count's directory, the manager's CPU profile
// goes.
const profileFile = "manager-cpu.pprof"

// profileSeconds is how long the CPU profile of a count runs: the
// control-plane floor, rounded up, which the operator's run takes at
// least, so that the profile covers the bulk of converging and little
// of the rest; two seconds where the floor was not measured.
func profileSeconds(floor float64) int {
	if floor <= 0 {
		return 2
	}
	return max(1, int(math.Ceil(floor)))
}

// captureProfile fetches a CPU profile of seconds from the manager's pprof
// endpoint at addr into path, in the background; the channel gets the
// outcome once the profile is written.
func captureProfile(ctx context.Context, addr string, seconds int, path string) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- fetchProfile(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds), path)
	}()
	return done
}

func fetchProfile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("CPU profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("CPU profile: %s answered %s: %s", url, resp.Status, body)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("CPU profile: %w", err)
	}
	return f.Close()
}

// profileTop is `go tool pprof -top` of the profile: the functions the
// manager spent its CPU in, most first.
func profileTop(ctx context.Context, path string, nodes int) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", fmt.Sprintf("-nodecount=%d", nodes), path).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go tool pprof -top %s: %w: %s", path, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
