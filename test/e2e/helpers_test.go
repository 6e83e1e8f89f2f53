package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/fixtures"
	"github.com/c5c3/glance-operator/test/operatortest"
	"github.com/c5c3/glance-operator/test/stack"
)

// waitTimeout bounds every wait of a story step. The slowest step is a Job
// failing for good: kwok fails each pod at once, but the Job controller backs
// off 10s, 20s and 40s between its four attempts.
const waitTimeout = 3 * time.Minute

// The command lines of the two launch modes.
const (
	configDirs      = "--config-dir /etc/glance/glance-api.conf.d/ --config-dir /etc/glance/backends.conf.d/"
	eventletCommand = "glance-api " + configDirs
	uwsgiPrefix     = "uwsgi --http :9292 --http-auto-chunked --http-chunked-input"
)

var readyReasons = fixtures.ReadyReasons

// scene is one story: its namespace and the Glance "glance" in it.
type scene struct {
	t  *testing.T
	ns string
	// remote is where the Glance's world and children live: the target
	// cluster the Glance names, or nil for the management cluster.
	remote client.Client
}

// newScene creates the story's namespace and waits for its default
// ServiceAccount, without which no pod can be created.
func newScene(t *testing.T, ns string) *scene {
	t.Helper()
	s := &scene{t: t, ns: ns}
	s.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	s.eventually("the default ServiceAccount", func() (bool, string) {
		err := cl.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, fmt.Sprint(err)
	})
	return s
}

func (s *scene) create(obj client.Object) {
	s.t.Helper()
	s.createOn(cl, obj)
}

func (s *scene) createOn(c client.Client, obj client.Object) {
	s.t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		s.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// children is the client of the cluster the Glance's children live on.
func (s *scene) children() client.Client {
	if s.remote != nil {
		return s.remote
	}
	return cl
}

func (s *scene) key(name string) client.ObjectKey {
	return client.ObjectKey{Namespace: s.ns, Name: name}
}

// get reads an object of the story's namespace; false when it does not
// exist.
func (s *scene) get(name string, obj client.Object) bool {
	s.t.Helper()
	err := cl.Get(context.Background(), s.key(name), obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		s.t.Fatalf("get %T %s: %v", obj, name, err)
	}
	return true
}

// world creates what a Glance depends on, as the platform would provide
// it: the credentials External Secrets would sync, the S3 credentials, and a
// MariaDB cluster (the stand-in reports it Ready), on the cluster its
// children live on.
func (s *scene) world() {
	s.t.Helper()
	s.worldWith("s3cr3t/p@ss:w0rd?#%", "service-user-password", "glance", "glance-secret-key")
}

// mariaDB creates the MariaDB cluster "mariadb" of the story.
func (s *scene) mariaDB() {
	s.t.Helper()
	mdb := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(1)}}}
	mdb.SetAPIVersion("k8s.mariadb.com/v1alpha1")
	mdb.SetKind("MariaDB")
	mdb.SetNamespace(s.ns)
	mdb.SetName("mariadb")
	s.createOn(s.children(), mdb)
}

func (s *scene) secret(name string, data map[string]string) {
	s.t.Helper()
	s.createOn(s.children(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns}, StringData: data})
}

// newGlance is the Glance "glance" of the story on 2025.2 with two replicas.
func (s *scene) newGlance(muts ...func(*v1alpha1.Glance)) *v1alpha1.Glance {
	g := &v1alpha1.Glance{
		ObjectMeta: metav1.ObjectMeta{Name: "glance", Namespace: s.ns},
		Spec: v1alpha1.GlanceSpec{
			OpenStackRelease: "2025.2",
			Image:            v1alpha1.ImageSpec{Repository: "registry.example.com/openstack/glance", Tag: "2025.2"},
			Deployment:       &v1alpha1.GlanceDeploymentSpec{Replicas: ptr.To[int32](2)},
			Database: v1alpha1.DatabaseSpec{
				ClusterRef: &v1alpha1.LocalObjectReference{Name: "mariadb"},
				Database:   "glance",
				SecretRef:  v1alpha1.SecretKeySelector{Name: "glance-db"},
			},
			Cache:            &v1alpha1.CacheSpec{Servers: []string{"memcached." + s.ns + ".svc:11211"}},
			KeystoneEndpoint: "http://keystone." + s.ns + ".svc:5000/v3",
			ServiceUser:      v1alpha1.ServiceUserSpec{SecretRef: v1alpha1.SecretKeySelector{Name: "glance-service-user"}},
		},
	}
	for _, m := range muts {
		m(g)
	}
	return g
}

// glance creates the story's Glance.
func (s *scene) glance(muts ...func(*v1alpha1.Glance)) {
	s.t.Helper()
	s.create(s.newGlance(muts...))
}

func (s *scene) backend(name string, isDefault bool) {
	s.t.Helper()
	s.create(&v1alpha1.GlanceBackend{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns},
		Spec: v1alpha1.GlanceBackendSpec{
			GlanceRef: v1alpha1.LocalObjectReference{Name: "glance"},
			Type:      v1alpha1.BackendTypeS3,
			IsDefault: isDefault,
			S3: &v1alpha1.S3BackendSpec{
				Host: "http://s3." + s.ns + ".svc:9000", Bucket: "images-" + name,
				CredentialsSecretRef: v1alpha1.LocalObjectReference{Name: "s3-credentials"},
			},
		},
	})
}

// install sets the scene of a plain deployment (world, one default
// backend, the Glance) and waits for it to be Ready.
func (s *scene) install(muts ...func(*v1alpha1.Glance)) *v1alpha1.Glance {
	s.t.Helper()
	s.world()
	s.backend("s3-primary", true)
	s.glance(muts...)
	return s.ready()
}

func (s *scene) glanceObj() *v1alpha1.Glance {
	s.t.Helper()
	g := &v1alpha1.Glance{}
	if !s.get("glance", g) {
		s.t.Fatal("the Glance does not exist")
	}
	return g
}

// update changes the Glance's spec through the API server (and so the
// webhook), retrying on conflicts with the operator's writes.
func (s *scene) update(mutate func(*v1alpha1.Glance)) {
	s.t.Helper()
	if err := s.tryUpdate(mutate); err != nil {
		s.t.Fatalf("update the Glance: %v", err)
	}
}

func (s *scene) tryUpdate(mutate func(*v1alpha1.Glance)) error {
	for {
		g := s.glanceObj()
		mutate(g)
		err := cl.Update(context.Background(), g)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// updateObj changes any object of the story, retrying on conflicts.
func updateObj[T client.Object](s *scene, name string, obj T, mutate func(T)) {
	s.t.Helper()
	for {
		if !s.get(name, obj) {
			s.t.Fatalf("%T %s does not exist", obj, name)
		}
		mutate(obj)
		err := cl.Update(context.Background(), obj)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			s.t.Fatalf("update %T %s: %v", obj, name, err)
		}
	}
}

// eventually polls cond until it holds; detail says what was seen last. It
// fails at once when the operator or the webhook has died.
func (s *scene) eventually(what string, cond func() (bool, string)) {
	s.t.Helper()
	operatortest.Eventually(s.t, what+" in "+s.ns, func() error {
		if ok, detail := cond(); !ok {
			return errors.New("last seen: " + detail)
		}
		return nil
	}, operatortest.Within(waitTimeout), operatortest.Every(250*time.Millisecond), operatortest.Unless(stk.Check))
}

// condition waits until the Glance reports the condition with the status
// and reason for its current generation, and returns it.
func (s *scene) condition(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	s.t.Helper()
	return s.conditionSaying(typ, status, reason, "")
}

// conditionSaying is condition with a message that contains text.
func (s *scene) conditionSaying(typ string, status metav1.ConditionStatus, reason, text string) metav1.Condition {
	s.t.Helper()
	var found metav1.Condition
	what := fmt.Sprintf("%s=%s/%s", typ, status, reason)
	if text != "" {
		what += fmt.Sprintf(" saying %q", text)
	}
	s.eventually(what, func() (bool, string) {
		g := s.glanceObj()
		c := meta.FindStatusCondition(g.Status.Conditions, typ)
		if c == nil {
			return false, typ + " not reported"
		}
		found = *c
		return c.Status == status && c.Reason == reason && c.ObservedGeneration == g.Generation && strings.Contains(c.Message, text),
			fmt.Sprintf("%s=%s/%s %q (generation %d of %d)", typ, c.Status, c.Reason, c.Message, c.ObservedGeneration, g.Generation)
	})
	return found
}

// ready waits until the Glance is Ready for its current generation with
// every sub-condition True and the reason of a plain deployment, unless
// want overrides it.
func (s *scene) ready(want ...map[string]string) *v1alpha1.Glance {
	s.t.Helper()
	reasons := map[string]string{v1alpha1.ConditionReady: v1alpha1.ReasonAllReady}
	for k, v := range readyReasons {
		reasons[k] = v
	}
	for _, w := range want {
		for k, v := range w {
			reasons[k] = v
		}
	}
	var g *v1alpha1.Glance
	s.eventually("Ready with all nine conditions True", func() (bool, string) {
		g = s.glanceObj()
		var wrong []string
		for typ, reason := range reasons {
			c := meta.FindStatusCondition(g.Status.Conditions, typ)
			switch {
			case c == nil:
				wrong = append(wrong, typ+" missing")
			case c.Status != metav1.ConditionTrue || c.Reason != reason || c.ObservedGeneration != g.Generation:
				wrong = append(wrong, fmt.Sprintf("%s=%s/%s %q (generation %d of %d), want True/%s", typ, c.Status, c.Reason, c.Message, c.ObservedGeneration, g.Generation, reason))
			}
		}
		slices.Sort(wrong)
		return len(wrong) == 0, strings.Join(wrong, "; ")
	})
	return g
}

// glanceEvents lists the events regarding the story's Glance, oldest first.
func (s *scene) glanceEvents() []eventsv1.Event {
	s.t.Helper()
	var list eventsv1.EventList
	if err := cl.List(context.Background(), &list, client.InNamespace(s.ns)); err != nil {
		s.t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "Glance" && e.Regarding.Name == "glance" {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b eventsv1.Event) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return out
}

// events waits until the Glance's events include every reason, in this
// order of first appearance.
func (s *scene) events(reasons ...string) {
	s.t.Helper()
	s.eventually("events "+strings.Join(reasons, ", "), func() (bool, string) {
		var seen []string
		for _, e := range s.glanceEvents() {
			if !slices.Contains(seen, e.Reason) {
				seen = append(seen, e.Reason)
			}
		}
		i := 0
		for _, r := range seen {
			if i < len(reasons) && r == reasons[i] {
				i++
			}
		}
		return i == len(reasons), "events " + strings.Join(seen, ", ")
	})
}

// event waits for an event of the type and reason on the Glance.
func (s *scene) event(typ, reason string) eventsv1.Event {
	s.t.Helper()
	var found eventsv1.Event
	s.eventually(typ+" event "+reason, func() (bool, string) {
		var seen []string
		for _, e := range s.glanceEvents() {
			if e.Type == typ && e.Reason == reason {
				found = e
				return true, ""
			}
			seen = append(seen, e.Type+"/"+e.Reason)
		}
		return false, "events " + strings.Join(seen, ", ")
	})
	return found
}

// conditionHistory records every reason a condition of the Glance takes, as
// a watch delivers the status writes: transitions too quick to poll for
// are still seen.
type conditionHistory struct {
	mu      sync.Mutex
	reasons []string
}

func (s *scene) recordCondition(typ string) *conditionHistory {
	s.t.Helper()
	wc, err := client.NewWithWatch(stk.Config, client.Options{Scheme: cl.Scheme()})
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &v1alpha1.GlanceList{}, client.InNamespace(s.ns))
	if err != nil {
		cancel()
		s.t.Fatal(err)
	}
	h := &conditionHistory{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			g, ok := ev.Object.(*v1alpha1.Glance)
			if !ok {
				continue
			}
			if c := meta.FindStatusCondition(g.Status.Conditions, typ); c != nil {
				h.mu.Lock()
				if n := len(h.reasons); n == 0 || h.reasons[n-1] != c.Reason {
					h.reasons = append(h.reasons, c.Reason)
				}
				h.mu.Unlock()
			}
		}
	}()
	s.t.Cleanup(func() {
		w.Stop()
		cancel()
		<-done
	})
	return h
}

// seen returns the reasons in the order the condition took them.
func (h *conditionHistory) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.reasons)
}

// inOrder reports whether want occurs in got in this order.
func inOrder(got, want []string) bool {
	i := 0
	for _, r := range got {
		if i < len(want) && r == want[i] {
			i++
		}
	}
	return i == len(want)
}

// deployment returns the API Deployment.
func (s *scene) deployment() *appsv1.Deployment {
	s.t.Helper()
	d := &appsv1.Deployment{}
	if !s.get("glance", d) {
		s.t.Fatal("the Deployment does not exist")
	}
	return d
}

// apiPods lists the glance-api pods that are Running and Ready, by the
// image of their glance-api container.
func (s *scene) apiPods() (ready int, images []string) {
	s.t.Helper()
	var pods corev1.PodList
	if err := cl.List(context.Background(), &pods, client.InNamespace(s.ns), client.MatchingLabels(render.APIPodLabels("glance"))); err != nil {
		s.t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready++
				images = append(images, p.Spec.Containers[0].Image)
			}
		}
	}
	return ready, images
}

// podsRunning waits until exactly n glance-api pods run, Ready, all with the
// Deployment's current template.
func (s *scene) podsRunning(n int) {
	s.t.Helper()
	s.eventually(fmt.Sprintf("%d glance-api pods Running and Ready", n), func() (bool, string) {
		var pods corev1.PodList
		if err := cl.List(context.Background(), &pods, client.InNamespace(s.ns), client.MatchingLabels(render.APIPodLabels("glance"))); err != nil {
			return false, err.Error()
		}
		d := s.deployment()
		var rsHash string
		var rsList appsv1.ReplicaSetList
		if err := cl.List(context.Background(), &rsList, client.InNamespace(s.ns), client.MatchingLabels(render.APIPodLabels("glance"))); err != nil {
			return false, err.Error()
		}
		for _, rs := range rsList.Items {
			if rs.Annotations["deployment.kubernetes.io/revision"] == d.Annotations["deployment.kubernetes.io/revision"] {
				rsHash = rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
			}
		}
		current, other := 0, 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			ready := p.Status.Phase == corev1.PodRunning && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			})
			if ready && rsHash != "" && p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == rsHash {
				current++
			} else {
				other++
			}
		}
		return current == n && other == 0, fmt.Sprintf("%d current Ready pods, %d others", current, other)
	})
}

// command is a container's command line.
func command(c corev1.Container) string {
	return strings.Join(append(slices.Clone(c.Command), c.Args...), " ")
}

// metricValue reads a series of the manager's /metrics, counter or gauge,
// summed over the series matching labels; 0 when absent.
func metricValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return metricAt(t, stk.ManagerMetricsURL, name, labels)
}

// metricAt is metricValue of the endpoint at url.
func metricAt(t *testing.T, url, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := stack.Scrape(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := families[name]
	if !ok {
		return 0
	}
	var total float64
	for _, m := range f.GetMetric() {
		match := 0
		for _, l := range m.GetLabel() {
			if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
				match++
			}
		}
		if match == len(labels) {
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total
}

// kubectl runs the cluster's kubectl as the admin user.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := controlplane.Kubectl(t, stk.Config, "", args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// gone waits until the object no longer exists.
func (s *scene) gone(what string, name string, obj client.Object) {
	s.t.Helper()
	s.eventually(what+" deleted", func() (bool, string) {
		err := cl.Get(context.Background(), s.key(name), obj)
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
}
