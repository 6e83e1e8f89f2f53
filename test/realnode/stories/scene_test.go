package stories

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/fixtures"
	"github.com/c5c3/glance-operator/test/keystone"
	"github.com/c5c3/glance-operator/test/realnode"
	"github.com/c5c3/glance-operator/test/s3store"
)

// Ports of the stand-ins: the API, and the admin API tests drive them by.
const (
	keystonePort      = 5000
	s3Port            = 9000
	standInAdminPort  = 9001
	bucket            = "glance-images"
	demoUser          = "demo"
	demoProject       = "demo"
	demoPassword      = "demo-password"
	dbPassword        = "s3cr3t/p@ss:w0rd?#%$x+y"
	servicePassword   = "service-user-password"
	glanceName        = "glance"
	backendName       = "s3"
	s3CredentialsName = "s3-credentials"
)

// scene is a namespace with what a Glance needs, all running as pods:
// Keystone and S3 stand-ins, a MariaDB (through the MariaDB stand-in
// operator), the Secrets, and the Glance with an S3 backend.
type scene struct {
	ns string
	// keystoneAdmin and s3Admin are the stand-ins' admin APIs, by pod IP.
	keystoneAdmin, s3Admin string
	glance                 *v1alpha1.Glance
}

// keystoneURL is the Keystone endpoint as pods see it.
func (s *scene) keystoneURL() string {
	return fmt.Sprintf("http://keystone.%s.svc:%d/v3", s.ns, keystonePort)
}

// apiURL is Glance's endpoint by the Service's DNS name.
func (s *scene) apiURL() string {
	return fmt.Sprintf("http://%s.%s.svc:%d", glanceName, s.ns, v1alpha1.APIPort)
}

// newScene sets the scene for a Glance of release and waits until it is
// Ready; edit may change the Glance before it is created.
func newScene(t *testing.T, release string, edit func(*v1alpha1.Glance)) *scene {
	t.Helper()
	ctx := t.Context()
	s := &scene{ns: env.Namespace(t)}
	s.keystoneAdmin = s.standIn(t, "keystone", keystonePort, "-url", s.keystoneURL())
	s.s3Admin = s.standIn(t, "s3", s3Port, "-bucket", bucket)
	s.setKeystoneUser(t, v1alpha1.DefaultServiceUsername, servicePassword, v1alpha1.DefaultServiceProjectName, "service", "admin")
	s.setKeystoneUser(t, demoUser, demoPassword, demoProject, "member", "reader")

	mariadb := &unstructured.Unstructured{}
	mariadb.SetGroupVersionKind(render.MariaDBGVK)
	mariadb.SetNamespace(s.ns)
	mariadb.SetName("mariadb")
	_ = unstructured.SetNestedField(mariadb.Object, int64(1), "spec", "replicas")
	for _, obj := range []any{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "glance-db", Namespace: s.ns}, StringData: map[string]string{"username": "glance", "password": dbPassword}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "glance-service-user", Namespace: s.ns}, StringData: map[string]string{"password": servicePassword}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s3CredentialsName, Namespace: s.ns}, StringData: map[string]string{"access-key-id": "glance", "secret-access-key": "glance/secret+key"}},
	} {
		if err := cl.Create(ctx, obj.(*corev1.Secret)); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.Create(ctx, mariadb); err != nil {
		t.Fatal(err)
	}

	g := fixtures.NewGlance(s.ns, glanceName, release)
	g.Spec.Image = v1alpha1.ImageSpec{Repository: glanceRepository, Tag: release}
	g.Spec.KeystoneEndpoint = s.keystoneURL()
	g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{Replicas: ptr.To[int32](2)}
	if edit != nil {
		edit(g)
	}
	b := fixtures.NewBackend(s.ns, backendName, glanceName, true, s3CredentialsName)
	b.Spec.S3.Host = fmt.Sprintf("http://s3.%s.svc:%d", s.ns, s3Port)
	b.Spec.S3.Bucket = bucket
	if err := cl.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	if err := cl.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	s.glance = s.waitReady(t, 0)
	t.Logf("Glance %s (%s) Ready %s after it was created", s.ns, release, time.Since(created).Round(100*time.Millisecond))
	return s
}

// standIn runs a stand-in (Keystone or S3) as a pod behind a Service of
// its name on port, and returns its admin API's base URL, by pod IP.
func (s *scene) standIn(t *testing.T, name string, port int32, args ...string) string {
	t.Helper()
	ctx := t.Context()
	labels := map[string]string{"app": name}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:  name,
				Image: standIns,
				Args: append([]string{name, "-addr", fmt.Sprintf(":%d", port), "-admin", fmt.Sprintf(":%d", standInAdminPort)},
					args...),
				Ports:           []corev1.ContainerPort{{ContainerPort: port}, {ContainerPort: standInAdminPort}},
				SecurityContext: realnode.Restricted(),
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
	if _, err := env.CS.CoreV1().Pods(s.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.CS.CoreV1().Services(s.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: port, TargetPort: intstr.FromInt32(port)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready, err := env.WaitPodReady(ctx, s.ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://%s:%d", ready.Status.PodIP, standInAdminPort)
}

// setKeystoneUser creates or changes a user in the Keystone stand-in, as
// an operator would in Keystone.
func (s *scene) setKeystoneUser(t *testing.T, name, password, project string, roles ...string) {
	t.Helper()
	body, _ := json.Marshal(keystone.UserRequest{Password: password, Project: project, Roles: roles})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, s.keystoneAdmin+"/users/"+name, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("set Keystone user %s: HTTP %d: %s", name, resp.StatusCode, b)
	}
}

// object looks an object of the bucket up in the S3 stand-in; ok is false
// when there is none.
func (s *scene) object(t *testing.T, key string) (obj s3store.Object, ok bool) {
	t.Helper()
	resp, err := http.Get(s.s3Admin + "/objects/" + bucket + "/" + key)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return obj, false
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("S3 object %s/%s: HTTP %d: %s", bucket, key, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&obj); err != nil {
		t.Fatal(err)
	}
	return obj, true
}

// waitReady waits until the Glance is Ready at a generation after
// observedAfter, and returns it.
func (s *scene) waitReady(t *testing.T, observedAfter int64) *v1alpha1.Glance {
	t.Helper()
	g := &v1alpha1.Glance{}
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, keyOf(s.ns, glanceName), g); err != nil {
			return false, err
		}
		ready := apimeta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionReady)
		return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == g.Generation && g.Generation > observedAfter, nil
	})
	if err != nil {
		t.Fatalf("Glance %s/%s not Ready: %v\n%s", s.ns, glanceName, err, s.describe(context.Background(), g))
	}
	return g
}

// describe is the Glance's conditions and its pods, for a failure message.
func (s *scene) describe(ctx context.Context, g *v1alpha1.Glance) string {
	var b strings.Builder
	for _, c := range g.Status.Conditions {
		fmt.Fprintf(&b, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	b.WriteString(env.DeploymentPods(ctx, s.ns, glanceName))
	jobs, err := env.CS.BatchV1().Jobs(s.ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, j := range jobs.Items {
			fmt.Fprintf(&b, "\n  job %s: succeeded %d failed %d", j.Name, j.Status.Succeeded, j.Status.Failed)
			b.WriteString(env.DeploymentPods(ctx, s.ns, j.Name))
		}
	}
	b.WriteString(env.DeploymentPods(ctx, s.ns, "mariadb"))
	return b.String()
}

// deployment is the Glance's Deployment.
func (s *scene) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	d, err := env.CS.AppsV1().Deployments(s.ns).Get(t.Context(), glanceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func keyOf(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// keystoneAttempts are the password authentications of user the Keystone
// stand-in saw since t0.
func (s *scene) keystoneAttempts(t *testing.T, user string, t0 time.Time) []keystone.Attempt {
	t.Helper()
	q := url.Values{"user": {user}, "since": {t0.UTC().Format(time.RFC3339Nano)}}
	resp, err := http.Get(s.keystoneAdmin + "/attempts?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var attempts []keystone.Attempt
	if err := json.NewDecoder(resp.Body).Decode(&attempts); err != nil {
		t.Fatal(err)
	}
	return attempts
}
