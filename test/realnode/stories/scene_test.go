package stories

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/keystoneadmin"
	"github.com/c5c3/glance-operator/test/realnode"
)

// scene is a realnode.Scene with its Glance, and its traffic once a story
// started it, for the stories of one test.
type scene struct {
	*realnode.Scene
	glance *v1alpha1.Glance
	tr     *traffic
}

// story is one story of a scene.
type story struct {
	name string
	run  func(*testing.T)
}

// tell runs the stories as subtests, in order, on the scene each leaves
// behind; once one fails, the rest, which start from its end, do not run.
func tell(t *testing.T, stories ...story) {
	t.Helper()
	for i, st := range stories {
		if !t.Run(st.name, st.run) {
			var rest []string
			for _, r := range stories[i+1:] {
				rest = append(rest, r.name)
			}
			if len(rest) > 0 {
				t.Fatalf("%s failed; not run, as they start from its end: %s", st.name, strings.Join(rest, ", "))
			}
			return
		}
	}
}

// newScene sets the scene for a Glance of release and waits until it is
// Ready; edit may change the Glance before it is created.
func newScene(t *testing.T, release string, edit func(*v1alpha1.Glance)) *scene {
	t.Helper()
	created := time.Now()
	s, err := setScene(t.Context(), env.Namespace(t), release, edit)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Glance %s (%s) Ready %s after it was created; its S3 server took a write %s after its pod was created", s.Namespace, release, time.Since(created).Round(100*time.Millisecond), s.S3.Startup.Round(100*time.Millisecond))
	return s
}

// setScene sets the scene for a Glance of release in the namespace ns,
// which exists, and waits until it is Ready; edit may change the Glance
// before it is created.
func setScene(ctx context.Context, ns, release string, edit func(*v1alpha1.Glance)) (*scene, error) {
	rs, err := env.SetScene(ctx, cl, ns, sceneImages)
	if err != nil {
		return nil, err
	}
	s := &scene{Scene: rs}
	fmt.Printf("scene %s: Keystone served %s and had the scene's users %s after its database was asked for\n",
		ns, rs.KeystoneStarted.Round(100*time.Millisecond), rs.KeystoneSet.Round(100*time.Millisecond))
	g := rs.NewGlance(sceneImages, release)
	if edit != nil {
		edit(g)
	}
	if err := cl.Create(ctx, g); err != nil {
		return nil, err
	}
	if s.glance, err = s.readyGlance(ctx, 0); err != nil {
		return nil, err
	}
	if err := s.RegisterImageService(ctx, s.glance.Status.Endpoint); err != nil {
		return nil, err
	}
	return s, nil
}

// setKeystoneUser creates or changes a user in Keystone.
func (s *scene) setKeystoneUser(t *testing.T, name, password, project string, roles ...string) {
	t.Helper()
	if err := s.SetKeystoneUser(t.Context(), name, password, project, roles...); err != nil {
		t.Fatalf("set Keystone user %s: %v", name, err)
	}
}

// object reads an object of the bucket from the S3 server.
func (s *scene) object(t *testing.T, key string) (realnode.S3Object, bool) {
	t.Helper()
	obj, ok, err := s.Object(t.Context(), key)
	if err != nil {
		t.Fatalf("S3 object %s/%s: %v", realnode.Bucket, key, err)
	}
	return obj, ok
}

// objectReads counts the GETs of an object of the bucket that the S3
// server has logged.
func (s *scene) objectReads(t *testing.T, key string) int {
	t.Helper()
	n, err := s.ObjectReads(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// keystoneAttempts are the password authentications of user Keystone
// audited since t0.
func (s *scene) keystoneAttempts(t *testing.T, user string, t0 time.Time) []keystoneadmin.Authentication {
	t.Helper()
	attempts, err := s.KeystoneAttempts(t.Context(), user, t0)
	if err != nil {
		t.Fatal(err)
	}
	return attempts
}

// waitReady waits until the Glance is Ready at a generation after
// observedAfter, and returns it.
func (s *scene) waitReady(t *testing.T, observedAfter int64) *v1alpha1.Glance {
	t.Helper()
	g, err := s.readyGlance(t.Context(), observedAfter)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// readyGlance waits until the Glance is Ready at a generation after
// observedAfter, and returns it.
func (s *scene) readyGlance(ctx context.Context, observedAfter int64) (*v1alpha1.Glance, error) {
	g := &v1alpha1.Glance{}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, keyOf(s.Namespace, realnode.GlanceName), g); err != nil {
			return false, err
		}
		ready := apimeta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionReady)
		return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == g.Generation && g.Generation > observedAfter, nil
	})
	if err != nil {
		return nil, fmt.Errorf("Glance %s/%s not Ready: %w\n%s", s.Namespace, realnode.GlanceName, err, s.describe(context.Background(), g))
	}
	return g, nil
}

// describe is the Glance's conditions and its pods, for a failure message.
func (s *scene) describe(ctx context.Context, g *v1alpha1.Glance) string {
	var b strings.Builder
	for _, c := range g.Status.Conditions {
		fmt.Fprintf(&b, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	b.WriteString(env.DeploymentPods(ctx, s.Namespace, realnode.GlanceName))
	jobs, err := env.CS.BatchV1().Jobs(s.Namespace).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, j := range jobs.Items {
			fmt.Fprintf(&b, "\n  job %s: succeeded %d failed %d", j.Name, j.Status.Succeeded, j.Status.Failed)
			b.WriteString(env.DeploymentPods(ctx, s.Namespace, j.Name))
		}
	}
	b.WriteString(env.DeploymentPods(ctx, s.Namespace, "mariadb"))
	return b.String()
}

// deployment is the Glance's Deployment.
func (s *scene) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	d, err := env.CS.AppsV1().Deployments(s.Namespace).Get(t.Context(), realnode.GlanceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func keyOf(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
