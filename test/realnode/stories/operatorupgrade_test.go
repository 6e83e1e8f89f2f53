package stories

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	toolswatch "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/hack/release/publish"
	"github.com/c5c3/glance-operator/pkg/controller/glance"
	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/test/realnode"
)

// previousReleaseRef is the release the operator upgrade starts from, a
// commit of this repository that setUp releases with its own make release.
// No release is published yet, so it is the commit of the last deliberate
// change of what the Glance pods run (each API pod's own address as
// worker_self_reference_url, which docs/upgrade-notes.md says rolls every
// pod once from earlier builds); it already takes a schema Job as done by
// image, release and database, so an operator upgrade runs none. Once
// releases are tagged, it is the newest tag, and a release that must
// change the pods says so in the upgrade notes and moves this ref past it.
const previousReleaseRef = "e41325cb0b4d35b2bdd3217365d28e2941542e75"

// settleWindow is how long the upgrade holds once the new manager has
// reconciled every Glance. What a pass writes shows within seconds (a
// ReplicaSet and its pods, a Job); the window adds the database poll, the
// longest wait a pass asks for short of the five-minute health recheck, so
// that a pass the first one scheduled runs inside it as well.
const settleWindow = glance.DatabasePollInterval + 10*time.Second

// upgradeScenes are the namespaces of the Glances the operator upgrade
// sets, one per launch mode, by release; TestEventletScene and
// TestUWSGIScene carry on with them.
var upgradeScenes = map[string]string{"2025.2": "upgrade-eventlet", "2026.1": "upgrade-uwsgi"}

// upgrade is the operator upgrade setUp ran.
var upgrade *operatorUpgrade

// operatorUpgrade is the operator upgrade: the release it starts from, the
// scenes set under it, how long each part took and what it changed.
type operatorUpgrade struct {
	previous publish.Release
	// built is the previous release's make release; scenesSet, its
	// Glances to Ready (its helm install is the suite's installed).
	built, scenesSet time.Duration
	// From helm upgrade: both Deployments rolled out, every Glance
	// reconciled by the new manager, the settle window over.
	rolledOut, reconciled, settled time.Duration
	scenes                         map[string]*scene
	seen                           upgradeSeen
}

// TestOperatorUpgrade: the chart of the release the upgrade starts from
// (previousReleaseRef, released by its own make release) runs a Glance of
// each launch mode to Ready; `helm upgrade --reset-then-reuse-values` to
// the chart under test rolls the manager and the webhook out and the new
// manager reconciles each Glance; from before the upgrade to the end of
// settleWindow after that, no Glance pod rolls or restarts, no Job is
// created and no Glance leaves Ready. setUp runs it, before every test, so
// that they run on the upgraded chart: this test reports it.
func TestOperatorUpgrade(t *testing.T) {
	u, s := upgrade, upgrade.seen
	t.Logf("the release the upgrade starts from, %s: make release %s, helm install %s, %d Glances Ready %s later",
		previousReleaseRef[:12], u.built.Round(100*time.Millisecond), installed.Round(100*time.Millisecond), s.glances, u.scenesSet.Round(100*time.Millisecond))
	t.Logf("helm upgrade to %s --version %s: manager and webhook rolled out after %s, every Glance reconciled by the new manager after %s, settled (%s held) after %s",
		env.Release.Chart, env.Release.ChartVersion, u.rolledOut.Round(100*time.Millisecond), u.reconciled.Round(100*time.Millisecond), settleWindow, u.settled.Round(100*time.Millisecond))
	t.Logf("through the upgrade: %d Glances, %d Glance pods rolled or restarted, %d pods created, %d Jobs created, %d times a Glance was seen not Ready",
		s.glances, s.podsRolled, len(s.podsCreated), len(s.jobsCreated), len(s.notReady))
	for _, note := range s.notes {
		t.Log(note)
	}
	if s.glances != len(upgradeScenes) {
		t.Errorf("the upgrade watched %d Glances, want %d", s.glances, len(upgradeScenes))
	}
	for _, f := range s.findings {
		t.Error(f)
	}
}

// upgradedScene is the scene of release that setUp carried through the
// operator upgrade, once its Glance is Ready; the test deletes its
// namespace when it ends.
func upgradedScene(t *testing.T, release string) *scene {
	t.Helper()
	s := upgrade.scenes[release]
	t.Cleanup(func() {
		_ = env.CS.CoreV1().Namespaces().Delete(context.Background(), s.Namespace, metav1.DeleteOptions{})
	})
	s.glance = s.waitReady(t, 0)
	return s
}

// run sets the scenes under the previous release's chart, which is
// installed, upgrades the chart to the tree under test's and holds.
func (u *operatorUpgrade) run(ctx context.Context) error {
	start := time.Now()
	u.scenes = map[string]*scene{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	for release, ns := range upgradeScenes {
		wg.Go(func() {
			err := env.CreateNamespace(ctx, ns)
			var s *scene
			if err == nil {
				s, err = setScene(ctx, ns, release, nil)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("a %s Glance under the release the upgrade starts from: %w", release, err))
				return
			}
			u.scenes[release] = s
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	u.scenesSet = time.Since(start)
	fmt.Printf("operator upgrade: %d Glances Ready under %s in %s\n", len(u.scenes), previousReleaseRef[:12], u.scenesSet.Round(100*time.Millisecond))

	namespaces := slices.Sorted(maps.Values(upgradeScenes))
	w, err := watchUpgrade(ctx, namespaces)
	if err != nil {
		return err
	}
	defer w.stop()
	began := time.Now()
	if _, err := env.UpgradeChart(ctx, env.Release); err != nil {
		return err
	}
	u.rolledOut = time.Since(began)
	if err := waitReconciled(ctx, namespaces); err != nil {
		return err
	}
	u.reconciled = time.Since(began)
	// The one wait on time in the story: see settleWindow.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(settleWindow):
	}
	u.settled = time.Since(began)
	if u.seen, err = w.finish(ctx, began, time.Now()); err != nil {
		return err
	}
	fmt.Printf("operator upgrade: helm upgrade to settled in %s\n", u.settled.Round(100*time.Millisecond))
	return nil
}

// waitReconciled waits until the leading manager runs the tree under
// test's image and has reconciled each Glance in namespaces: its metrics
// hold the Glance's series, which a pass creates as it begins
// (metrics.TrackGlance), and no pass is running, on two scrapes in a row.
func waitReconciled(ctx context.Context, namespaces []string) error {
	var why string
	streak := 0
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if why = notReconciled(ctx, namespaces); why != "" {
			streak = 0
			return false, nil
		}
		streak++
		return streak == 2, nil
	})
	if err != nil {
		return fmt.Errorf("the upgraded manager did not reconcile every Glance (%s): %w", why, err)
	}
	return nil
}

// notReconciled says why the leading manager has not been seen to
// reconcile every Glance in namespaces; empty when it has.
func notReconciled(ctx context.Context, namespaces []string) string {
	lease, err := env.CS.CoordinationV1().Leases(realnode.OperatorNamespace).Get(ctx, operator.LeaderElectionID, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return "no one holds the lease"
	}
	name, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	pod, err := env.CS.CoreV1().Pods(realnode.OperatorNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	if image := pod.Spec.Containers[0].Image; image != env.Images.Operator {
		return fmt.Sprintf("the leader %s runs %s", name, image)
	}
	var port int32
	for _, p := range pod.Spec.Containers[0].Ports {
		if p.Name == "metrics" {
			port = p.ContainerPort
		}
	}
	body, err := scrape(ctx, fmt.Sprintf("http://%s:%d/metrics", pod.Status.PodIP, port))
	if err != nil {
		return fmt.Sprintf("the leader %s's metrics: %v", name, err)
	}
	for _, ns := range namespaces {
		if !hasSample(body, "glance_operator_db_sync_total{", `namespace="`+ns+`"`) {
			return fmt.Sprintf("the leader %s has not begun a pass of the Glance in %s", name, ns)
		}
	}
	if !hasSample(body, `controller_runtime_active_workers{controller="glance"} 0`, "") {
		return fmt.Sprintf("the leader %s is running a pass", name)
	}
	return ""
}

// hasSample says whether a line of the exposition body begins with prefix
// and holds label.
func hasSample(body, prefix, label string) bool {
	for line := range strings.Lines(body) {
		if strings.HasPrefix(line, prefix) && strings.Contains(line, label) {
			return true
		}
	}
	return false
}

var metricsClient = &http.Client{Timeout: 10 * time.Second}

func scrape(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return string(b), err
}

// upgradeWatch follows the Glances' namespaces through the upgrade: what
// they held when it began, and every change after, so that what comes and
// goes between two looks (a Job the operator creates and deletes, a
// Glance that is not Ready for a moment) counts too.
type upgradeWatch struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
	mu     sync.Mutex

	namespaces []string
	// What the namespaces held when the upgrade began.
	pods        map[types.UID]corev1.Pod
	deployments map[types.NamespacedName]appsv1.Deployment
	replicaSets map[types.UID]bool
	jobs        map[types.UID]batchv1.Job
	glances     int

	// What changed since.
	created, deleted, restarted map[types.UID]corev1.Pod
	newJob                      map[types.UID]bool
	newJobs, deletedJobs        []batchv1.Job
	newReplicaSets              []appsv1.ReplicaSet
	notReady                    []string
	lastReady                   map[types.NamespacedName]string
	errs                        []error
	notes                       []string
	// readySince is each Glance's Ready lastTransitionTime when the
	// upgrade began.
	readySince map[types.NamespacedName]metav1.Time
}

// upgradeSeen is what the upgrade changed in the Glances' namespaces.
type upgradeSeen struct {
	glances int
	// podsRolled are the Glance pods replaced, restarted or added.
	podsRolled               int
	podsCreated, jobsCreated []string
	notReady                 []string
	// findings are what the upgrade changed that it must not, each with
	// what shows why; notes are for the log.
	findings, notes []string
}

// watchUpgrade lists the namespaces' pods, Jobs, ReplicaSets, Deployments
// and Glances and follows each change after the list.
func watchUpgrade(ctx context.Context, namespaces []string) (*upgradeWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &upgradeWatch{
		cancel: cancel, namespaces: namespaces,
		pods: map[types.UID]corev1.Pod{}, deployments: map[types.NamespacedName]appsv1.Deployment{},
		replicaSets: map[types.UID]bool{}, jobs: map[types.UID]batchv1.Job{}, newJob: map[types.UID]bool{},
		created: map[types.UID]corev1.Pod{}, deleted: map[types.UID]corev1.Pod{}, restarted: map[types.UID]corev1.Pod{},
		lastReady: map[types.NamespacedName]string{}, readySince: map[types.NamespacedName]metav1.Time{},
	}
	for _, ns := range namespaces {
		for _, f := range []struct {
			list     func() client.ObjectList
			seed, on func(watch.EventType, runtime.Object)
		}{
			{func() client.ObjectList { return &corev1.PodList{} }, w.seedPod, w.onPod},
			{func() client.ObjectList { return &batchv1.JobList{} }, w.seedJob, w.onJob},
			{func() client.ObjectList { return &appsv1.ReplicaSetList{} }, w.seedReplicaSet, w.onReplicaSet},
			{func() client.ObjectList { return &appsv1.DeploymentList{} }, w.seedDeployment, w.onDeployment},
			{func() client.ObjectList { return &v1alpha1.GlanceList{} }, w.seedGlance, w.onGlance},
		} {
			if err := w.follow(ctx, ns, f.list, f.seed, f.on); err != nil {
				w.stop()
				return nil, err
			}
		}
	}
	return w, nil
}

// follow lists list's kind in ns, hands each item to seed, then each
// change after the list to on, until the watch stops.
func (w *upgradeWatch) follow(ctx context.Context, ns string, list func() client.ObjectList, seed, on func(watch.EventType, runtime.Object)) error {
	l := list()
	if err := w.listInto(ctx, ns, l, seed); err != nil {
		return err
	}
	w.done.Go(func() {
		for rv := l.GetResourceVersion(); ; {
			expired := w.watchFrom(ctx, ns, list, rv, on)
			if ctx.Err() != nil {
				return
			}
			if expired == nil {
				w.fail(fmt.Errorf("the watch of %T in %s ended before the upgrade settled", l, ns))
				return
			}
			// The API server no longer has rv: it restarts a kind's watch
			// cache when the upgrade changes its CRD. A new list takes up
			// from now; what came and went in between is caught by
			// finish, which compares what is there, and Ready's
			// lastTransitionTime, with the snapshot.
			again := list()
			if err := w.listInto(ctx, ns, again, on); err != nil {
				if ctx.Err() == nil {
					w.fail(err)
				}
				return
			}
			w.mu.Lock()
			w.notes = append(w.notes, fmt.Sprintf("the watch of %T in %s expired (%v); listed again at resourceVersion %s", l, ns, expired, again.GetResourceVersion()))
			w.mu.Unlock()
			rv = again.GetResourceVersion()
		}
	})
	return nil
}

// listInto lists l's kind in ns and hands each item to to.
func (w *upgradeWatch) listInto(ctx context.Context, ns string, l client.ObjectList, to func(watch.EventType, runtime.Object)) error {
	if err := cl.List(ctx, l, client.InNamespace(ns)); err != nil {
		return err
	}
	items, err := apimeta.ExtractList(l)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, item := range items {
		to(watch.Added, item)
	}
	return nil
}

// watchFrom hands each change after rv to on until the watch ends; it
// returns the error when it ended because the API server no longer has
// rv. RetryWatcher reopens a watch the API server closes from the last
// resourceVersion seen, so no change falls between two watches.
func (w *upgradeWatch) watchFrom(ctx context.Context, ns string, list func() client.ObjectList, rv string, on func(watch.EventType, runtime.Object)) (expired error) {
	rw, err := toolswatch.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cl.Watch(ctx, list(), &client.ListOptions{Namespace: ns, Raw: &o})
		},
	})
	if err != nil {
		w.fail(err)
		return nil
	}
	defer rw.Stop()
	for ev := range rw.ResultChan() {
		switch ev.Type {
		case watch.Error:
			err := apierrors.FromObject(ev.Object)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				expired = err
			} else {
				w.fail(fmt.Errorf("the watch of %T in %s failed: %w", list(), ns, err))
			}
		case watch.Bookmark:
		default:
			w.mu.Lock()
			on(ev.Type, ev.Object)
			w.mu.Unlock()
		}
	}
	return expired
}

func (w *upgradeWatch) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, err)
}

func (w *upgradeWatch) stop() {
	w.cancel()
	w.done.Wait()
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

func (w *upgradeWatch) seedPod(_ watch.EventType, o runtime.Object) {
	p := o.(*corev1.Pod)
	w.pods[p.UID] = *p
}

func (w *upgradeWatch) onPod(t watch.EventType, o runtime.Object) {
	p := o.(*corev1.Pod)
	before, known := w.pods[p.UID]
	switch {
	case !known:
		w.created[p.UID] = *p
	case t == watch.Deleted:
		w.deleted[p.UID] = *p
	case restarts(p) > restarts(&before):
		w.restarted[p.UID] = *p
	}
}

func (w *upgradeWatch) seedJob(_ watch.EventType, o runtime.Object) {
	j := o.(*batchv1.Job)
	w.jobs[j.UID] = *j
}

// onJob records the Jobs created, and those of before deleted: a schema
// Job deleted is one the operator no longer takes as done.
func (w *upgradeWatch) onJob(t watch.EventType, o runtime.Object) {
	j := o.(*batchv1.Job)
	_, known := w.jobs[j.UID]
	switch {
	case known && t == watch.Deleted:
		w.deletedJobs = append(w.deletedJobs, *j)
	case !known && !w.newJob[j.UID]:
		w.newJob[j.UID] = true
		w.newJobs = append(w.newJobs, *j)
	}
}

func (w *upgradeWatch) seedReplicaSet(_ watch.EventType, o runtime.Object) {
	w.replicaSets[o.(*appsv1.ReplicaSet).UID] = true
}

func (w *upgradeWatch) onReplicaSet(t watch.EventType, o runtime.Object) {
	rs := o.(*appsv1.ReplicaSet)
	if t == watch.Added && !w.replicaSets[rs.UID] {
		w.replicaSets[rs.UID] = true
		w.newReplicaSets = append(w.newReplicaSets, *rs)
	}
}

func (w *upgradeWatch) seedDeployment(_ watch.EventType, o runtime.Object) {
	d := o.(*appsv1.Deployment)
	w.deployments[client.ObjectKeyFromObject(d)] = *d
}

// onDeployment needs no record: finish compares each Deployment's
// generation and template with what it was, and a generation never goes
// back.
func (w *upgradeWatch) onDeployment(watch.EventType, runtime.Object) {}

func (w *upgradeWatch) seedGlance(t watch.EventType, o runtime.Object) {
	g := o.(*v1alpha1.Glance)
	if c := apimeta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		w.readySince[client.ObjectKeyFromObject(g)] = c.LastTransitionTime
	}
	w.onGlance(t, o)
}

// onGlance records each Glance's Ready whenever it is not True, once per
// status, reason and message.
func (w *upgradeWatch) onGlance(t watch.EventType, o runtime.Object) {
	g := o.(*v1alpha1.Glance)
	key := client.ObjectKeyFromObject(g)
	if _, seen := w.lastReady[key]; !seen {
		w.glances++
	}
	state := "absent"
	if c := apimeta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		state = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		if c.Status == metav1.ConditionTrue {
			state = string(metav1.ConditionTrue)
		}
	}
	if t == watch.Deleted {
		state = "deleted"
	}
	if state != string(metav1.ConditionTrue) && state != w.lastReady[key] {
		w.notReady = append(w.notReady, fmt.Sprintf("%s %s Ready %s", time.Now().Format("15:04:05.000"), key, state))
	}
	w.lastReady[key] = state
}

// finish stops the watches and says what the upgrade, begun at began,
// changed up to end, looking at the namespaces once more.
func (w *upgradeWatch) finish(ctx context.Context, began, end time.Time) (upgradeSeen, error) {
	w.stop()
	s := upgradeSeen{glances: w.glances, notReady: w.notReady, notes: w.notes}
	var before []string
	for _, j := range w.jobs {
		before = append(before, j.Namespace+"/"+j.Name)
	}
	slices.Sort(before)
	s.notes = append(s.notes, fmt.Sprintf("Jobs when the upgrade began (any created or deleted since is reported): %s", strings.Join(before, ", ")))
	for _, err := range w.errs {
		s.findings = append(s.findings, "the upgrade cannot be vouched for: "+err.Error())
	}
	for _, line := range w.notReady {
		s.findings = append(s.findings, "a Glance left Ready during the upgrade: "+line)
	}
	// A Ready that went and came back between two looks moved its
	// lastTransitionTime.
	for key, since := range w.readySince {
		var g v1alpha1.Glance
		if err := cl.Get(ctx, key, &g); err != nil {
			return s, err
		}
		if c := apimeta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionReady); c == nil || !c.LastTransitionTime.Equal(&since) {
			s.findings = append(s.findings, fmt.Sprintf("Glance %s's Ready changed during the upgrade: lastTransitionTime %s, now %+v", key, since.Format(time.RFC3339), c))
		}
	}

	// The Glances' Deployments: neither their templates nor their
	// ReplicaSets changed.
	for key, before := range w.deployments {
		var now appsv1.Deployment
		if err := cl.Get(ctx, key, &now); err != nil {
			return s, err
		}
		if now.Generation != before.Generation {
			s.findings = append(s.findings, fmt.Sprintf("the upgrade changed Deployment %s (generation %d to %d); its pod template changed in:\n  %s",
				key, before.Generation, now.Generation, strings.Join(templateDiff(before.Spec.Template, now.Spec.Template), "\n  ")))
		}
	}
	for _, rs := range w.newReplicaSets {
		s.findings = append(s.findings, fmt.Sprintf("the upgrade created ReplicaSet %s/%s", rs.Namespace, rs.Name))
	}

	// Pods: the Glance pods, those of its Deployment's selector, are the
	// ones they were, and no pod came but a Job's.
	isGlance := func(p corev1.Pod) bool {
		for key, d := range w.deployments {
			sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
			if err == nil && key.Namespace == p.Namespace && sel.Matches(labels.Set(p.Labels)) {
				return true
			}
		}
		return false
	}
	rolled := map[types.UID]bool{}
	for what, pods := range map[string]map[types.UID]corev1.Pod{"created": w.created, "deleted": w.deleted, "restarted": w.restarted} {
		for uid, p := range pods {
			switch {
			case isGlance(p):
				rolled[uid] = true
				s.findings = append(s.findings, fmt.Sprintf("the upgrade %s Glance pod %s/%s", what, p.Namespace, p.Name))
			case what == "created" && metav1.GetControllerOf(&p) != nil && metav1.GetControllerOf(&p).Kind == "Job":
				// Counted with its Job.
			default:
				s.findings = append(s.findings, fmt.Sprintf("the upgrade %s pod %s/%s", what, p.Namespace, p.Name))
			}
			if what == "created" {
				s.podsCreated = append(s.podsCreated, p.Namespace+"/"+p.Name)
			}
		}
	}
	for _, ns := range w.namespaces {
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return s, err
		}
		now := map[types.UID]bool{}
		for _, p := range pods.Items {
			if isGlance(p) {
				now[p.UID] = true
				if _, known := w.pods[p.UID]; !known {
					rolled[p.UID] = true
				}
			}
		}
		for uid, p := range w.pods {
			if p.Namespace == ns && isGlance(p) && !now[uid] {
				rolled[uid] = true
			}
		}
	}
	s.podsRolled = len(rolled)

	// Jobs: none, but the runs a CronJob has scheduled inside the window.
	scheduled := map[types.UID]string{}
	for _, ns := range w.namespaces {
		var cjs batchv1.CronJobList
		if err := cl.List(ctx, &cjs, client.InNamespace(ns)); err != nil {
			return s, err
		}
		for _, cj := range cjs.Items {
			next, err := nextRun(cj, began.Add(-time.Minute))
			if err != nil {
				return s, err
			}
			if next.Before(end) {
				scheduled[cj.UID] = next.String()
				s.notes = append(s.notes, fmt.Sprintf("CronJob %s/%s (%q) runs at %s, inside the upgrade: its runs do not count", cj.Namespace, cj.Name, cj.Spec.Schedule, next))
			} else {
				s.notes = append(s.notes, fmt.Sprintf("CronJob %s/%s (%q) next runs at %s, after the upgrade: a run in it would count", cj.Namespace, cj.Name, cj.Spec.Schedule, next.Format(time.RFC3339)))
			}
		}
	}
	byCronJob := func(j batchv1.Job) bool {
		owner := metav1.GetControllerOf(&j)
		return owner != nil && scheduled[owner.UID] != ""
	}
	for _, j := range w.newJobs {
		if byCronJob(j) {
			continue
		}
		s.jobsCreated = append(s.jobsCreated, j.Namespace+"/"+j.Name)
		why := ""
		var g v1alpha1.Glance
		if err := cl.Get(ctx, client.ObjectKey{Namespace: j.Namespace, Name: realnode.GlanceName}, &g); err == nil {
			if c := apimeta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionDatabaseReady); c != nil {
				why = fmt.Sprintf("; the Glance's DatabaseReady is now %s %s: %s", c.Status, c.Reason, c.Message)
			}
		}
		s.findings = append(s.findings, fmt.Sprintf("the upgrade created Job %s/%s (created %s, labels %v)%s",
			j.Namespace, j.Name, j.CreationTimestamp.Format(time.RFC3339), j.Labels, why))
	}
	for _, j := range w.deletedJobs {
		if !byCronJob(j) {
			s.findings = append(s.findings, fmt.Sprintf("the upgrade deleted Job %s/%s (uid %s)", j.Namespace, j.Name, j.UID))
		}
	}
	// The Jobs of before are all there still, even those whose deletion a
	// watch gap hid.
	remaining := map[types.UID]bool{}
	for _, ns := range w.namespaces {
		var jobs batchv1.JobList
		if err := cl.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
			return s, err
		}
		for _, j := range jobs.Items {
			remaining[j.UID] = true
		}
	}
	for uid, j := range w.jobs {
		if !remaining[uid] && !byCronJob(j) && !slices.ContainsFunc(w.deletedJobs, func(d batchv1.Job) bool { return d.UID == uid }) {
			s.findings = append(s.findings, fmt.Sprintf("Job %s/%s (uid %s) is gone after the upgrade", j.Namespace, j.Name, uid))
		}
	}
	slices.Sort(s.findings)
	return s, nil
}

// nextRun is a CronJob's first scheduled time after from, in its time zone;
// without one, the kube-controller-manager's, which runs on this machine.
func nextRun(cj batchv1.CronJob, from time.Time) (time.Time, error) {
	sched, err := cron.ParseStandard(cj.Spec.Schedule)
	if err != nil {
		return time.Time{}, fmt.Errorf("CronJob %s/%s schedule %q: %w", cj.Namespace, cj.Name, cj.Spec.Schedule, err)
	}
	loc := time.Local
	if cj.Spec.TimeZone != nil {
		if loc, err = time.LoadLocation(*cj.Spec.TimeZone); err != nil {
			return time.Time{}, err
		}
	}
	return sched.Next(from.In(loc)), nil
}

// templateDiff lists where two pod templates differ, a line per field by
// its path: list items with a name by their name, others by index.
func templateDiff(before, after corev1.PodTemplateSpec) []string {
	b, a := flatten(before), flatten(after)
	var diff []string
	paths := map[string]bool{}
	for k := range b {
		paths[k] = true
	}
	for k := range a {
		paths[k] = true
	}
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		if b[path] != a[path] {
			diff = append(diff, fmt.Sprintf("%s: %s -> %s", path, orAbsent(b[path]), orAbsent(a[path])))
		}
	}
	return diff
}

func orAbsent(v string) string {
	if v == "" {
		return "(absent)"
	}
	return v
}

// flatten is v's JSON as a value per leaf path.
func flatten(v any) map[string]string {
	out := map[string]string{}
	raw, err := json.Marshal(v)
	if err != nil {
		return map[string]string{"": err.Error()}
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return map[string]string{"": err.Error()}
	}
	var walk func(path string, x any)
	walk = func(path string, x any) {
		switch x := x.(type) {
		case map[string]any:
			for k, v := range x {
				walk(path+"."+k, v)
			}
		case []any:
			for i, v := range x {
				key := fmt.Sprint(i)
				if m, ok := v.(map[string]any); ok {
					if name, ok := m["name"].(string); ok {
						key = name
					}
				}
				walk(path+"["+key+"]", v)
			}
		default:
			leaf, _ := json.Marshal(x)
			out[path] = string(leaf)
		}
	}
	walk("template", tree)
	return out
}
