package render

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

func TestCacheMaintenanceScriptRendering(t *testing.T) {
	g := imageCacheGlance() // 50Gi, interval defaulted
	s, err := CacheMaintenanceScript(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"cache_dir=${CACHE_DIR:-/var/lib/glance/image-cache}",
		"max_size=${CACHE_MAX_SIZE_BYTES:-42949672960}", // 80% of 50Gi
		"poll_seconds=${CACHE_POLL_SECONDS:-30}",
		"interval_seconds=${CACHE_MAINTENANCE_INTERVAL_SECONDS:-1800}",
		"glance-cache-pruner --config-dir /etc/glance/glance-api.conf.d/ --config-dir /etc/glance/backends.conf.d/",
		"glance-cache-cleaner --config-dir /etc/glance/glance-api.conf.d/ --config-dir /etc/glance/backends.conf.d/",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q", want)
		}
	}
	if regexp.MustCompile(`@[A-Z_]+@`).MatchString(s) {
		t.Error("script has an unreplaced placeholder")
	}
	if out, err := exec.Command("/bin/sh", "-n", "-c", s).CombinedOutput(); err != nil {
		t.Errorf("sh -n: %v: %s", err, out)
	}

	g.Spec.ImageCache.MaintenanceInterval = &metav1.Duration{Duration: 2 * time.Hour}
	g.Spec.ExtraConfig = map[string]map[string]string{"DEFAULT": {"image_cache_max_size": "1000"}}
	s, err = CacheMaintenanceScript(g)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s, "interval_seconds=${CACHE_MAINTENANCE_INTERVAL_SECONDS:-7200}") || !strings.Contains(s, "max_size=${CACHE_MAX_SIZE_BYTES:-1000}") {
		t.Errorf("interval or extraConfig max size not rendered:\n%s", s)
	}

	for _, bad := range []*v1alpha1.ImageCacheSpec{
		nil,
		{Size: resource.MustParse("1Gi"), MaintenanceInterval: &metav1.Duration{Duration: -time.Minute}},
	} {
		g := minimalGlance()
		g.Spec.ImageCache = bad
		if _, err := CacheMaintenanceScript(g); err == nil {
			t.Errorf("imageCache %+v accepted", bad)
		}
	}
}

// scriptRun is the cache-maintenance script running under /bin/sh with fake
// glance-cache-pruner and glance-cache-cleaner on PATH.
type scriptRun struct {
	t      *testing.T
	cmd    *exec.Cmd
	dir    string
	stderr *lineBuffer
	done   chan error
}

// fakeTools writes the fake executables. Each appends "<name> <args>" to
// calls.log; the pruner exits with the n-th entry of pruneExits on its n-th
// call (0 after the list), sleeping first when prunerSleeps.
func startScript(t *testing.T, env map[string]string, pruneExits []string, prunerSleeps bool, cacheBytes int) *scriptRun {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	cache := filepath.Join(dir, "cache")
	for _, d := range []string{bin, cache} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(cache, "image"), bytes.Repeat([]byte{1}, cacheBytes), 0o644); err != nil {
		t.Fatal(err)
	}
	sleep := ""
	if prunerSleeps {
		// exec, so that the script's kill reaches the sleep itself.
		sleep = "exec sleep 30\n"
	}
	pruner := `#!/bin/sh
echo "glance-cache-pruner $*" >> "$CALLS_LOG"
n=$(grep -c '^glance-cache-pruner' "$CALLS_LOG")
` + sleep + `i=0 code=0
for c in ` + strings.Join(pruneExits, " ") + `; do
	i=$((i + 1))
	if [ "$i" -eq "$n" ]; then code=$c; fi
done
exit "$code"
`
	cleaner := "#!/bin/sh\necho \"glance-cache-cleaner $*\" >> \"$CALLS_LOG\"\n"
	for name, body := range map[string]string{"glance-cache-pruner": pruner, "glance-cache-cleaner": cleaner} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	g := imageCacheGlance()
	script, err := CacheMaintenanceScript(g)
	if err != nil {
		t.Fatal(err)
	}
	scriptPath := filepath.Join(dir, CacheMaintenanceScriptKey)
	if err := os.WriteFile(scriptPath, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command("/bin/sh", scriptPath)
	cmd.Env = []string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"CALLS_LOG=" + filepath.Join(dir, "calls.log"),
		"CACHE_DIR=" + cache,
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	r := &scriptRun{t: t, cmd: cmd, dir: dir, stderr: newLineBuffer(), done: make(chan error, 1)}
	cmd.Stderr = r.stderr
	cmd.Stdout = &bytes.Buffer{}
	// Bounds Wait should a stray child keep the output pipes open.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

func (r *scriptRun) calls() []string {
	b, err := os.ReadFile(filepath.Join(r.dir, "calls.log"))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// terminate sends SIGTERM and checks that the script exits within a second.
func (r *scriptRun) terminate() {
	r.t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		r.t.Fatal(err)
	}
	start := time.Now()
	select {
	case err := <-r.done:
		if err != nil {
			r.t.Errorf("exit after SIGTERM: %v (stderr %q)", err, r.stderr.lines())
		}
		if d := time.Since(start); d > time.Second {
			r.t.Errorf("exited %v after SIGTERM", d)
		}
	case <-time.After(time.Second):
		r.t.Fatalf("still running a second after SIGTERM")
	}
}

func (r *scriptRun) running() bool {
	select {
	case err := <-r.done:
		r.done <- err
		return false
	default:
		return true
	}
}

// TestCacheMaintenanceScript runs the script for real under /bin/sh (dash on
// Debian): over the max size it runs both tools every poll, counts
// consecutive failures without exiting, resets the count on success, and
// ends promptly on SIGTERM.
func TestCacheMaintenanceScript(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Fatal("/bin/sh is missing: the cache-maintenance script runs under it in the image and here")
	}
	const configArgs = "--config-dir /etc/glance/glance-api.conf.d/ --config-dir /etc/glance/backends.conf.d/"

	t.Run("over max size, failures counted and reset", func(t *testing.T) {
		t.Parallel()
		r := startScript(t, map[string]string{
			"CACHE_MAX_SIZE_BYTES": "1024", "CACHE_POLL_SECONDS": "1", "CACHE_MAINTENANCE_INTERVAL_SECONDS": "3600",
		}, []string{"1", "3", "0", "2"}, false, 64*1024)
		for _, want := range []string{
			"glance-cache-maintenance failed: 1 consecutive",
			"glance-cache-maintenance failed: 2 consecutive",
			// The third run succeeds, so the fourth failure counts from 1.
			"glance-cache-maintenance failed: 1 consecutive",
		} {
			if !r.stderr.waitFor(want, 4*time.Second) {
				t.Fatalf("no %q in stderr %q", want, r.stderr.lines())
			}
			if !r.running() {
				t.Fatal("the script exited after a failed run")
			}
		}
		calls := r.calls()
		if len(calls) < 8 {
			t.Fatalf("calls %q", calls)
		}
		for i, c := range calls[:8] {
			want := "glance-cache-pruner " + configArgs
			if i%2 == 1 {
				// The cleaner runs even after the pruner failed.
				want = "glance-cache-cleaner " + configArgs
			}
			if c != want {
				t.Errorf("call %d: %q, want %q", i, c, want)
			}
		}
		r.terminate()
	})

	t.Run("under max size waits for the interval", func(t *testing.T) {
		t.Parallel()
		r := startScript(t, map[string]string{
			"CACHE_MAX_SIZE_BYTES": "1073741824", "CACHE_POLL_SECONDS": "1", "CACHE_MAINTENANCE_INTERVAL_SECONDS": "3",
		}, nil, false, 4096)
		// date +%s has whole seconds: 1.2s may read as 2, never as 3.
		time.Sleep(1200 * time.Millisecond)
		if c := r.calls(); c != nil {
			t.Fatalf("ran before the interval: %q", c)
		}
		deadline := time.Now().Add(5 * time.Second)
		for len(r.calls()) < 2 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if c := r.calls(); len(c) < 2 || !strings.HasPrefix(c[0], "glance-cache-pruner") || !strings.HasPrefix(c[1], "glance-cache-cleaner") {
			t.Fatalf("calls after the interval: %q", c)
		}
		if l := r.stderr.lines(); len(l) != 0 {
			t.Errorf("stderr %q after successful runs", l)
		}
		r.terminate()
	})

	t.Run("SIGTERM during the poll sleep", func(t *testing.T) {
		t.Parallel()
		r := startScript(t, map[string]string{"CACHE_MAX_SIZE_BYTES": "1073741824", "CACHE_MAINTENANCE_INTERVAL_SECONDS": "3600"}, nil, false, 0)
		// The default 30s poll: only an interruptible sleep ends in time.
		time.Sleep(500 * time.Millisecond)
		r.terminate()
		if c := r.calls(); c != nil {
			t.Errorf("calls %q", c)
		}
	})

	t.Run("SIGTERM during a run", func(t *testing.T) {
		t.Parallel()
		r := startScript(t, map[string]string{"CACHE_MAX_SIZE_BYTES": "0", "CACHE_POLL_SECONDS": "1"}, nil, true, 4096)
		deadline := time.Now().Add(3 * time.Second)
		for r.calls() == nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if r.calls() == nil {
			t.Fatal("the pruner never ran")
		}
		r.terminate()
	})
}

// lineBuffer collects written lines and lets a test wait for one.
type lineBuffer struct {
	mu      sync.Mutex
	partial string
	all     []string
	changed chan struct{}
	// next is the index of the first line waitFor has not consumed, so
	// that the same text must appear again to be found again.
	next int
}

func newLineBuffer() *lineBuffer { return &lineBuffer{changed: make(chan struct{}, 1)} }

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.partial += string(p)
	for {
		i := strings.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		b.all = append(b.all, b.partial[:i])
		b.partial = b.partial[i+1:]
	}
	select {
	case b.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (b *lineBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.all...)
}

// waitFor waits for line among the lines not yet consumed, consuming up to
// and including it.
func (b *lineBuffer) waitFor(line string, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		b.mu.Lock()
		for i := b.next; i < len(b.all); i++ {
			if b.all[i] == line {
				b.next = i + 1
				b.mu.Unlock()
				return true
			}
		}
		b.mu.Unlock()
		select {
		case <-b.changed:
		case <-deadline:
			return false
		}
	}
}
