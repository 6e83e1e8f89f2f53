//go:build chaos

package e2e

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/operatortest"
	"github.com/c5c3/glance-operator/test/stack"
)

// The chaos suite runs with `-tags chaos`: its short mode in make test, its
// long mode (-chaos.long) in make chaos. It shares the e2e stack and story
// helpers, in a test binary of its own, since it kills the one manager.
var chaosLong = flag.Bool("chaos.long", false, "the long chaos mode: more Glances and kills")

// TestChaosOperatorKills SIGKILLs the manager on every phase transition it
// sees and at random moments between, during a fresh install and a 2025.2 →
// 2026.1 upgrade. Every Glance must converge with its phase Jobs created
// exactly once, in phase order, with no Warning event and no panic.
func TestChaosOperatorKills(t *testing.T) {
	glances, minKills := 1, 10
	if *chaosLong {
		glances, minKills = 3, 50
	}
	k := startKiller(t)
	t.Cleanup(func() {
		kills, phases := k.stop()
		t.Logf("%d kills; phases at a kill: %s", kills, strings.Join(phases, ", "))
		if kills < minKills {
			t.Errorf("%d kills, want at least %d", kills, minKills)
		}
		checkNoPanic(t)
	})
	for i := range glances {
		ns := fmt.Sprintf("chaos-kills-%d", i)
		k.watch(ns)
		t.Run(ns, func(t *testing.T) {
			t.Parallel()
			chaosStory(t, ns, k, minKills)
		})
	}
}

func chaosStory(t *testing.T, ns string, k *killer, minKills int) {
	s := newScene(t, ns)
	jobs := recordJobs(t, s)
	s.install()
	// Half the kills in the install, the rest in the upgrade.
	k.waitKills(t, minKills/2)
	s.update(release("2026.1"))
	g := s.ready()
	k.waitKills(t, minKills)
	k.stop()
	g = s.ready()
	if g.Status.InstalledRelease != "2026.1" || g.Status.TargetRelease != "" || g.Status.UpgradePhase != "" {
		t.Errorf("status after the upgrade: installed %q, target %q, phase %q", g.Status.InstalledRelease, g.Status.TargetRelease, g.Status.UpgradePhase)
	}
	jobs.check(t)
	var events eventsv1.EventList
	if err := cl.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning {
			t.Errorf("Warning event %s on %s %s: %s", e.Reason, e.Regarding.Kind, e.Regarding.Name, e.Note)
		}
	}
}

// killer kills the manager whenever a watched Glance's phase changes, and
// at random moments between, until stopped.
type killer struct {
	mu       sync.Mutex
	ns       []string
	kills    int
	phases   map[string]bool
	last     map[string]string
	stopped  bool
	done     chan struct{}
	stopOnce sync.Once
	cancel   context.CancelFunc
	err      error
}

func startKiller(t *testing.T) *killer {
	ctx, cancel := context.WithCancel(context.Background())
	k := &killer{phases: map[string]bool{}, last: map[string]string{}, done: make(chan struct{}), cancel: cancel}
	go k.run(ctx)
	return k
}

func (k *killer) watch(ns string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ns = append(k.ns, ns)
}

func (k *killer) run(ctx context.Context) {
	defer close(k.done)
	nextRandom := time.Now().Add(randomGap())
	for ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		phase, changed := k.transition(ctx)
		if !changed && time.Now().Before(nextRandom) {
			continue
		}
		if !changed {
			phase = "random:" + phase
		}
		if err := stk.KillManager(ctx); err != nil {
			if ctx.Err() == nil {
				k.mu.Lock()
				k.err = err
				k.mu.Unlock()
			}
			return
		}
		k.mu.Lock()
		k.kills++
		k.phases[phase] = true
		k.mu.Unlock()
		nextRandom = time.Now().Add(randomGap())
	}
}

// randomGap is the time to the next kill when no phase changes: long enough
// for the manager to make progress between kills.
func randomGap() time.Duration { return time.Second + rand.N(2*time.Second) }

// transition reads the watched Glances and reports the phase of the first
// one whose phase changed since the last read.
func (k *killer) transition(ctx context.Context) (string, bool) {
	k.mu.Lock()
	namespaces := slices.Clone(k.ns)
	k.mu.Unlock()
	current := ""
	for _, ns := range namespaces {
		var g v1alpha1.Glance
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "glance"}, &g); err != nil {
			continue
		}
		phase := glancePhase(&g)
		current = phase
		k.mu.Lock()
		prev, seen := k.last[ns]
		k.last[ns] = phase
		k.mu.Unlock()
		if seen && prev != phase {
			return phase, true
		}
	}
	return current, false
}

// glancePhase names where a Glance is: its upgrade phase, or the reason of
// DatabaseReady and of Ready.
func glancePhase(g *v1alpha1.Glance) string {
	if g.Status.UpgradePhase != "" {
		return "upgrade:" + string(g.Status.UpgradePhase)
	}
	reason := func(typ string) string {
		if c := meta.FindStatusCondition(g.Status.Conditions, typ); c != nil {
			return c.Reason
		}
		return "-"
	}
	return reason(v1alpha1.ConditionDatabaseReady) + "/" + reason(v1alpha1.ConditionReady)
}

// waitKills waits until the killer has killed the manager n times.
func (k *killer) waitKills(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		k.mu.Lock()
		kills, err, stopped := k.kills, k.err, k.stopped
		k.mu.Unlock()
		switch {
		case err != nil:
			t.Fatalf("kill the manager: %v", err)
		case kills >= n || stopped:
			return
		case time.Now().After(deadline):
			t.Fatalf("%d kills in %s, want %d", kills, waitTimeout, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop ends the killing and returns the kills and the phases they hit.
func (k *killer) stop() (int, []string) {
	k.stopOnce.Do(func() {
		k.cancel()
		<-k.done
		k.mu.Lock()
		k.stopped = true
		k.mu.Unlock()
	})
	k.mu.Lock()
	defer k.mu.Unlock()
	var phases []string
	for p := range k.phases {
		phases = append(phases, p)
	}
	slices.Sort(phases)
	return k.kills, phases
}

// jobRecord is what a watch saw of the schema Jobs and the Deployment of a
// story, with the times it saw each.
type jobRecord struct {
	mu sync.Mutex
	// created holds each Job's UIDs by name and image.
	created map[string][]string
	// times are the first sightings: "created <job>", "complete <job>",
	// "template 2026.1" and "rolled out 2026.1".
	times map[string]time.Time
	ended bool
}

func recordJobs(t *testing.T, s *scene) *jobRecord {
	t.Helper()
	r := &jobRecord{created: map[string][]string{}, times: map[string]time.Time{}}
	wc, err := client.NewWithWatch(stk.Config, client.Options{Scheme: cl.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, list := range []client.ObjectList{&batchv1.JobList{}, &appsv1.DeploymentList{}} {
		w, err := wc.Watch(ctx, list, client.InNamespace(s.ns))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		wg.Go(func() {
			for ev := range w.ResultChan() {
				r.observe(ev)
			}
			if ctx.Err() == nil {
				r.mu.Lock()
				r.ended = true
				r.mu.Unlock()
			}
		})
		t.Cleanup(w.Stop)
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return r
}

func (r *jobRecord) observe(ev watch.Event) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	first := func(key string) {
		if _, ok := r.times[key]; !ok {
			r.times[key] = now
		}
	}
	switch o := ev.Object.(type) {
	case *batchv1.Job:
		if !strings.HasPrefix(o.Name, "glance-db-") || strings.HasPrefix(o.Name, "glance-db-purge") {
			return
		}
		image := o.Spec.Template.Spec.Containers[0].Image
		key := o.Name + "@" + image[strings.LastIndex(image, ":")+1:]
		if ev.Type == watch.Added && !slices.Contains(r.created[key], string(o.UID)) {
			r.created[key] = append(r.created[key], string(o.UID))
		}
		first("created " + key)
		for _, c := range o.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				first("complete " + key)
			}
		}
	case *appsv1.Deployment:
		if o.Name != "glance" {
			return
		}
		i := slices.IndexFunc(o.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == render.ContainerAPI })
		if i < 0 || !strings.HasSuffix(o.Spec.Template.Spec.Containers[i].Image, ":2026.1") {
			return
		}
		first("template 2026.1")
		want := int32(1)
		if o.Spec.Replicas != nil {
			want = *o.Spec.Replicas
		}
		st := o.Status
		if st.ObservedGeneration >= o.Generation && st.Replicas == want && st.UpdatedReplicas == want && st.AvailableReplicas == want {
			first("rolled out 2026.1")
		}
	}
}

// check holds the record to the upgrade's contract: each schema Job of each
// release created once, and each phase done before the next starts.
func (r *jobRecord) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		t.Error("a watch of the Jobs or Deployments ended early; the record may miss a creation")
	}
	want := []string{"glance-db-sync@2025.2", "glance-db-expand@2026.1", "glance-db-migrate@2026.1", "glance-db-contract@2026.1", "glance-db-sync@2026.1"}
	for _, key := range want {
		if n := len(r.created[key]); n != 1 {
			t.Errorf("Job %s created %d times, want once: %v", key, n, r.created[key])
		}
	}
	for key := range r.created {
		if !slices.Contains(want, key) {
			t.Errorf("Job %s created, which the upgrade does not run", key)
		}
	}
	for _, order := range [][2]string{
		{"complete glance-db-expand@2026.1", "created glance-db-migrate@2026.1"},
		{"complete glance-db-migrate@2026.1", "template 2026.1"},
		{"rolled out 2026.1", "created glance-db-contract@2026.1"},
		{"complete glance-db-contract@2026.1", "created glance-db-sync@2026.1"},
	} {
		before, okBefore := r.times[order[0]]
		after, okAfter := r.times[order[1]]
		switch {
		case !okBefore || !okAfter:
			t.Errorf("not seen: %q (%v) or %q (%v)", order[0], okBefore, order[1], okAfter)
		case !before.Before(after):
			t.Errorf("%q at %s, not before %q at %s", order[0], before.Format(time.StampMicro), order[1], after.Format(time.StampMicro))
		}
	}
}

// checkNoPanic fails when a run of the manager logged a panic.
func checkNoPanic(t *testing.T) {
	t.Helper()
	for _, path := range stk.ManagerLogs() {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Error(err)
			continue
		}
		if i := strings.Index(string(b), "panic"); i >= 0 {
			t.Errorf("%s logged a panic: %.300s", path, b[i:])
		}
	}
}

// TestChaosAPIServerRestarts restarts kube-apiserver, keeping etcd, once
// mid-install and once while the upgrade is Expanding. The manager keeps
// running through both (the same PID) and the Glance converges on 2026.1.
func TestChaosAPIServerRestarts(t *testing.T) {
	s := newScene(t, "chaos-apiserver")
	pid := stk.ManagerPID()
	s.world()
	s.backend("s3-primary", true)
	s.glance()
	if g := s.glanceObj(); meta.IsStatusConditionTrue(g.Status.Conditions, v1alpha1.ConditionReady) {
		t.Fatal("the Glance is Ready before the restart; the restart would not be mid-install")
	}
	restartAPIServer(t)
	s.ready()

	s.update(release("2026.1"))
	waitPhase(t, s, v1alpha1.UpgradePhaseExpanding)
	restartAPIServer(t)
	g := s.ready()
	if g.Status.InstalledRelease != "2026.1" || g.Status.TargetRelease != "" || g.Status.UpgradePhase != "" {
		t.Errorf("status after the upgrade: installed %q, target %q, phase %q", g.Status.InstalledRelease, g.Status.TargetRelease, g.Status.UpgradePhase)
	}
	if got := stk.ManagerPID(); got != pid {
		t.Errorf("the manager's PID went from %d to %d: it restarted instead of riding out the outage", pid, got)
	}
}

// restartAPIServer stops kube-apiserver for a few seconds and starts it
// again on the same address and etcd.
func restartAPIServer(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := stk.RestartAPIServer(ctx, 3*time.Second); err != nil {
		t.Fatal(err)
	}
}

// waitPhase polls the Glance closely until its upgrade is in phase: the
// phases of a kwok cluster last a second or two.
func waitPhase(t *testing.T, s *scene, phase v1alpha1.UpgradePhase) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var seen []string
	for time.Now().Before(deadline) {
		var g v1alpha1.Glance
		if err := cl.Get(context.Background(), s.key("glance"), &g); err == nil {
			if g.Status.UpgradePhase == phase {
				return
			}
			if p := string(g.Status.UpgradePhase); len(seen) == 0 || seen[len(seen)-1] != p {
				seen = append(seen, p)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("upgrade phase %s not seen; saw %q", phase, seen)
}

// TestChaosLeaderFailover runs two managers with leader election in place
// of the stack's one: exactly one reconciles, and the other takes over when
// the leader is stopped (SIGTERM releases the lease) or killed (SIGKILL:
// the lease must expire). The failover times are logged for the record;
// they are figures, not assertions.
func TestChaosLeaderFailover(t *testing.T) {
	ctx := context.Background()
	if err := stk.StopManager(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stk.StartManager(ctx); err != nil {
			t.Errorf("start the stack's manager again: %v", err)
		}
	})
	electing := []string{"--leader-elect=true", "--leader-election-namespace=" + stack.OperatorNamespace}
	replica := func(name string) *stack.ManagerReplica {
		t.Helper()
		r, err := stk.StartManagerReplica(ctx, name, electing...)
		if r != nil {
			t.Cleanup(func() { _ = r.Stop(30 * time.Second) })
		}
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := replica("a"), replica("b")
	leader, standby := waitLeader(t, a, b)

	s := newScene(t, "chaos-leader")
	s.install()
	if n := glanceReconciles(t, standby); n != 0 {
		t.Errorf("the standby reconciled %v Glances; only the leader may", n)
	}
	if glanceReconciles(t, leader) == 0 {
		t.Error("the leader reconciled no Glance; the check above is vacuous")
	}

	start := time.Now()
	if err := leader.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, standby)
	sigterm := time.Since(start)

	c := replica("c")
	leader, standby = waitLeader(t, standby, c)
	start = time.Now()
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, standby)
	sigkill := time.Since(start)
	t.Logf("failover: %.1fs after SIGTERM of the leader, %.1fs after SIGKILL", sigterm.Seconds(), sigkill.Seconds())

	// The new leader carries on: a change converges.
	s.update(func(g *v1alpha1.Glance) { g.Spec.Deployment.Replicas = ptr.To[int32](3) })
	s.ready()
	if n := glanceReconciles(t, standby); n == 0 {
		t.Error("the new leader reconciled no Glance")
	}
}

// waitLeader waits until exactly one of the replicas holds the lease, and
// returns it and, when there are two, the other.
func waitLeader(t *testing.T, replicas ...*stack.ManagerReplica) (leader, standby *stack.ManagerReplica) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var leaders, others []*stack.ManagerReplica
		for _, r := range replicas {
			if families, err := stack.Scrape(context.Background(), r.MetricsURL); err == nil && leads(families) {
				leaders = append(leaders, r)
			} else {
				others = append(others, r)
			}
		}
		if len(leaders) > 1 {
			t.Fatalf("%d replicas lead at once", len(leaders))
		}
		if len(leaders) == 1 {
			if len(others) > 0 {
				return leaders[0], others[0]
			}
			return leaders[0], nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no replica took the lease within a minute")
	return nil, nil
}

// glanceReconciles is the Glance controller's reconcile count on a replica.
func glanceReconciles(t *testing.T, r *stack.ManagerReplica) float64 {
	t.Helper()
	return metricAt(t, r.MetricsURL, "controller_runtime_reconcile_total", map[string]string{"controller": "glance"})
}

// leads reports whether a replica's metrics say it holds the lease.
func leads(families map[string]*dto.MetricFamily) bool {
	f, ok := families["leader_election_master_status"]
	if !ok {
		return false
	}
	for _, m := range f.GetMetric() {
		if m.GetGauge().GetValue() == 1 {
			return true
		}
	}
	return false
}

// TestChaosEtcdRestore restores etcd from a backup taken before the
// manager's last write to a Glance, with thousands of revisions between
// them: every resourceVersion goes back, below the versions the manager's
// caches hold. Their watches resume from those versions and would miss every
// change until the cluster's writes pass them again. The manager must
// notice, say so once and end, so that the run started after it (as a
// Deployment restarts its pod) lists afresh and reconciles a change made
// after the restore.
func TestChaosEtcdRestore(t *testing.T) {
	ctx := context.Background()
	s := newScene(t, "chaos-etcd-restore")
	s.world()
	s.backend("s3-primary", true)
	s.glance()
	s.ready()

	backup := t.TempDir()
	if err := stk.BackupEtcd(ctx, backup); err != nil {
		t.Fatal(err)
	}
	before := s.glanceObj().ResourceVersion
	churn(t, s.ns, etcdRestoreChurn)
	s.update(func(g *v1alpha1.Glance) { g.Spec.Deployment.Replicas = ptr.To[int32](3) })
	written := s.ready().ResourceVersion
	t.Logf("the Glance at resourceVersion %s at the backup, %s at the manager's last write", before, written)

	restoreCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := stk.RestoreEtcd(restoreCtx, backup); err != nil {
		t.Fatal(err)
	}
	s.update(func(g *v1alpha1.Glance) { g.Spec.Deployment.Replicas = ptr.To[int32](4) })
	// The scene holds only while the Glance's version is below the one
	// the manager's caches hold.
	if restored := s.glanceObj().ResourceVersion; !olderVersion(t, restored, written) {
		t.Fatalf("after the restore the Glance is at resourceVersion %s, not below the manager's last write at %s", restored, written)
	}
	exitCtx, cancel := context.WithTimeout(ctx, pipeline.DefaultRewindCheckInterval+time.Minute)
	defer cancel()
	ended, err := stk.WaitManagerExit(exitCtx)
	if err != nil {
		t.Fatalf("the manager did not end after the restore: %v", err)
	}
	t.Logf("the manager ended after the restore: %.300s", ended)
	if n := managerLogLines(t, pipeline.ErrRewound.Error(), "the server is at resourceVersion"); n != 1 {
		t.Errorf("the manager said %d times that the server's resourceVersions went back, want once", n)
	}
	if err := stk.StartManager(ctx); err != nil {
		t.Fatal(err)
	}
	s.eventually("the Deployment scaled to 4 after the restore", func() (bool, string) {
		d := s.deployment()
		return ptr.Deref(d.Spec.Replicas, 0) == 4, fmt.Sprintf("replicas %d", ptr.Deref(d.Spec.Replicas, 0))
	})
	s.ready()
	checkNoPanic(t)
}

// etcdRestoreChurn is how many revisions the cluster moves between the
// backup and the manager's last write: more than the cluster's own writes
// (leases, kwok's node heartbeats, events) make in DefaultStaleCacheLimit and the
// test's slack after it.
const etcdRestoreChurn = 3000

// churn makes n writes: updates of a few ConfigMaps of namespace, at once,
// through a client of its own that client-side throttling does not slow.
func churn(t *testing.T, namespace string, n int) {
	t.Helper()
	cfg := rest.CopyConfig(stk.Config)
	cfg.QPS, cfg.Burst = 1000, 1000
	cl, err := operatortest.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("churn-%d", w)}}
			if err := cl.Create(context.Background(), cm); err != nil {
				errs <- err
				return
			}
			for i := range n / writers {
				cm.Data = map[string]string{"write": strconv.Itoa(i)}
				if err := cl.Update(context.Background(), cm); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var last corev1.ConfigMap
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "churn-0"}, &last); err != nil {
		t.Fatal(err)
	}
	t.Logf("churned %d writes, to resourceVersion %s", n, last.ResourceVersion)
}

// olderVersion compares two resourceVersions of one kube-apiserver.
func olderVersion(t *testing.T, a, b string) bool {
	t.Helper()
	c, err := resourceversion.CompareResourceVersion(a, b)
	if err != nil {
		t.Fatalf("resourceVersions %q and %q: %v", a, b, err)
	}
	return c < 0
}

// managerLogLines counts the lines of the manager's logs that hold every
// one of texts.
func managerLogLines(t *testing.T, texts ...string) int {
	t.Helper()
	n := 0
	for _, path := range stk.ManagerLogs() {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !slices.ContainsFunc(texts, func(text string) bool { return !strings.Contains(line, text) }) {
				n++
			}
		}
	}
	return n
}
