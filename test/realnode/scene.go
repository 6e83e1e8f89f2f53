package realnode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/release"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/debianroot"
	"github.com/c5c3/glance-operator/test/fixtures"
	"github.com/c5c3/glance-operator/test/keystoneadmin"
	"github.com/c5c3/glance-operator/test/s3store"
)

// What a scene holds, by name.
const (
	KeystonePort     = 5000
	S3Port           = 9000
	StandInAdminPort = 9001
	Bucket           = "glance-images"
	GlanceName       = "glance"
	BackendName      = "s3"
	// DemoUser, a member of DemoProject, uploads; DemoReader, a reader of
	// it, may only look.
	DemoUser     = "demo"
	DemoReader   = "demo-reader"
	DemoProject  = "demo"
	DemoPassword = "demo-password"
	// The passwords a scene starts with. The DB password holds what a DSN
	// must percent-encode, and '$', which oslo.config would substitute.
	DBPassword          = "s3cr3t/p@ss:w0rd?#%$x+y"
	ServicePassword     = "service-user-password"
	DBSecretName        = "glance-db"
	ServiceSecretName   = "glance-service-user"
	S3CredentialsSecret = "s3-credentials"
)

// SceneImages are the images of a scene beside the chart's: the S3
// stand-in, MariaDB and Keystone by digest, and the repository of the
// Glance images, tagged by release.
type SceneImages struct {
	StandIns, MariaDB, Keystone, GlanceRepository string
}

// PushSceneImages builds and pushes the scene's images, at the same time:
// the Glance images of root tagged with each of releases. The images of the
// Debian roots come from the artifact cache, written once per machine.
func (e *Env) PushSceneImages(ctx context.Context, root debianroot.Root, releases []string) (SceneImages, error) {
	reg, dir := e.Cluster.Registry, e.ImageDir()
	var imgs SceneImages
	var wg sync.WaitGroup
	errs := make([]error, 4)
	wg.Go(func() {
		imgs.StandIns, errs[0] = reg.BuildAndPush(ctx, dir, "standins", "./test/realnode/standins", "test/standins", "v1")
	})
	wg.Go(func() {
		var archive string
		if archive, _, errs[3] = debianroot.KeystoneImageArchive("test/keystone:trixie"); errs[3] == nil {
			imgs.Keystone, errs[3] = reg.Push(ctx, archive, "test/keystone", "trixie")
		}
	})
	wg.Go(func() {
		var archive string
		if archive, _, errs[1] = debianroot.MariaDBImageArchive("test/mariadb:trixie"); errs[1] == nil {
			imgs.MariaDB, errs[1] = reg.Push(ctx, archive, "test/mariadb", "trixie")
		}
	})
	wg.Go(func() { imgs.GlanceRepository, errs[2] = e.PushGlanceImage(ctx, root, releases) })
	wg.Wait()
	return imgs, errors.Join(errs...)
}

// PushGlanceImage builds the Glance images of root, one per launch mode of
// releases and at the same time, and pushes each tagged with its releases;
// it returns the repository.
func (e *Env) PushGlanceImage(ctx context.Context, root debianroot.Root, releases []string) (string, error) {
	byMode := map[release.LaunchMode][]string{}
	for _, r := range releases {
		mode := release.LaunchModeOf(r)
		byMode[mode] = append(byMode[mode], r)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for mode, tags := range byMode {
		wg.Go(func() {
			archive, _, err := debianroot.GlanceImageArchive(root, mode, "openstack/glance:"+tags[0])
			for _, tag := range tags {
				if err == nil {
					_, err = e.Cluster.Registry.Push(ctx, archive, "openstack/glance", tag)
				}
			}
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	return e.Cluster.Registry.Host + "/openstack/glance", errors.Join(errs...)
}

// Scene is a namespace with what a Glance needs, all running as pods:
// Debian's Keystone, an S3 stand-in, a MariaDB (through the MariaDB
// stand-in operator) that Keystone and Glance keep their databases in, the
// Secrets, and an S3 GlanceBackend.
type Scene struct {
	Namespace string
	// S3Admin is the S3 stand-in's admin API, by pod IP.
	S3Admin string
	// KeystoneStarted is how long Keystone took to serve from when its
	// database was asked for (the MariaDB and the database Ready, the
	// pod's setup, uWSGI started); KeystoneSet, to the scene's users made
	// too. For reports.
	KeystoneStarted, KeystoneSet time.Duration
	// keystone is Keystone's administrator at keystoneByIP, its v3
	// endpoint by the pod's IP.
	keystone     *keystoneadmin.Client
	keystoneByIP string
	cs           kubernetes.Interface
}

// KeystoneURL is the Keystone endpoint as pods see it.
func (s *Scene) KeystoneURL() string {
	return fmt.Sprintf("http://keystone.%s.svc:%d/v3", s.Namespace, KeystonePort)
}

// APIURL is Glance's endpoint by the Service's DNS name.
func (s *Scene) APIURL() string {
	return fmt.Sprintf("http://%s.%s.svc:%d", GlanceName, s.Namespace, v1alpha1.APIPort)
}

// NewGlance is the scene's Glance of release: two replicas of the
// registry's image, the scene's Keystone.
func (s *Scene) NewGlance(imgs SceneImages, release string) *v1alpha1.Glance {
	g := fixtures.NewGlance(s.Namespace, GlanceName, release)
	g.Spec.Image = v1alpha1.ImageSpec{Repository: imgs.GlanceRepository, Tag: release}
	g.Spec.KeystoneEndpoint = s.KeystoneURL()
	g.Spec.Deployment = &v1alpha1.GlanceDeploymentSpec{Replicas: ptr.To[int32](2)}
	// The rotation story's source alternates two Keystone users: the
	// Secret names the user, and the spec says so.
	g.Spec.ServiceUser.UsernameKey = "username"
	return g
}

// SetScene sets the scene in namespace ns, which exists: the Secrets, the
// MariaDB and the S3 backend of the Glance named GlanceName, the S3
// stand-in, and Keystone with the Glance's service user and the demo
// project's users.
func (e *Env) SetScene(ctx context.Context, cl client.Client, ns string, imgs SceneImages) (*Scene, error) {
	s := &Scene{Namespace: ns, cs: e.CS}
	mariadb := &unstructured.Unstructured{}
	mariadb.SetGroupVersionKind(render.MariaDBGVK)
	mariadb.SetNamespace(ns)
	mariadb.SetName("mariadb")
	if err := unstructured.SetNestedField(mariadb.Object, int64(1), "spec", "replicas"); err != nil {
		return nil, err
	}
	b := fixtures.NewBackend(ns, BackendName, GlanceName, true, S3CredentialsSecret)
	b.Spec.S3.Host = fmt.Sprintf("http://s3.%s.svc:%d", ns, S3Port)
	b.Spec.S3.Bucket = Bucket
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: DBSecretName, Namespace: ns}, StringData: map[string]string{"username": "glance", "password": DBPassword}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ServiceSecretName, Namespace: ns}, StringData: map[string]string{"username": v1alpha1.DefaultServiceUsername, "password": ServicePassword}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: S3CredentialsSecret, Namespace: ns}, StringData: map[string]string{"access-key-id": "glance", "secret-access-key": "glance/secret+key"}},
		mariadb, b,
	} {
		if err := cl.Create(ctx, obj); err != nil {
			return nil, err
		}
	}
	var err error
	if s.S3Admin, err = e.standIn(ctx, ns, imgs.StandIns, "s3", S3Port, "-bucket", Bucket); err != nil {
		return nil, err
	}
	keystoneStart := time.Now()
	if s.keystone, s.keystoneByIP, err = e.startKeystone(ctx, cl, ns, imgs.Keystone, s.KeystoneURL()); err != nil {
		return nil, err
	}
	s.KeystoneStarted = time.Since(keystoneStart)
	// Glance's install guide gives its service user the admin role on the
	// service project; the service role is what newer guides give a
	// service's user (Keystone lets it validate tokens).
	if err := s.SetKeystoneUser(ctx, v1alpha1.DefaultServiceUsername, ServicePassword, v1alpha1.DefaultServiceProjectName, "admin", "service"); err != nil {
		return nil, err
	}
	if err := s.SetKeystoneUser(ctx, DemoUser, DemoPassword, DemoProject, "member"); err != nil {
		return nil, err
	}
	if err := s.SetKeystoneUser(ctx, DemoReader, DemoPassword, DemoProject, "reader"); err != nil {
		return nil, err
	}
	s.KeystoneSet = time.Since(keystoneStart)
	return s, nil
}

// standIn runs a stand-in (S3) as a pod behind a Service of
// its name on port, and returns its admin API's base URL, by pod IP.
func (e *Env) standIn(ctx context.Context, ns, image, name string, port int32, args ...string) (string, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:  name,
				Image: image,
				Args: append([]string{name, "-addr", fmt.Sprintf(":%d", port), "-admin", fmt.Sprintf(":%d", StandInAdminPort)},
					args...),
				Ports:           []corev1.ContainerPort{{ContainerPort: port}, {ContainerPort: StandInAdminPort}},
				SecurityContext: Restricted(),
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
	ready, _, err := e.ServePod(ctx, ns, pod, corev1.ServicePort{Port: port, TargetPort: intstr.FromInt32(port)})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("http://%s:%d", ready.Status.PodIP, StandInAdminPort), nil
}

// adminClient is the client of Keystone's API and the S3 stand-in's admin
// API, from this process.
var adminClient = &http.Client{Timeout: 30 * time.Second}

// SetKeystoneUser creates the user name in Keystone or sets its password,
// and makes roles its roles on project (created when missing), as a
// cloud's administrator would. Keystone revokes the user's tokens when its
// password is set.
func (s *Scene) SetKeystoneUser(ctx context.Context, name, password, project string, roles ...string) error {
	if err := s.keystone.SetUser(ctx, name, password, project, roles...); err != nil {
		return fmt.Errorf("Keystone user %s: %w", name, err)
	}
	return nil
}

// RegisterImageService puts the image service in Keystone's catalog, its
// endpoints at url (a Glance's status.endpoint) on every interface.
func (s *Scene) RegisterImageService(ctx context.Context, url string) error {
	if url == "" {
		return fmt.Errorf("the Glance in %s has no endpoint to register", s.Namespace)
	}
	return s.keystone.SetService(ctx, "image", "glance", KeystoneRegion, url)
}

// KeystoneToken is a token of user in project from Keystone, with its
// catalog.
func (s *Scene) KeystoneToken(ctx context.Context, user, password, project string) (keystoneadmin.Token, error) {
	return keystoneadmin.Authenticate(ctx, adminClient, s.keystoneByIP, user, password, project)
}

// KeystoneAttempts are the password authentications of the user named
// user that Keystone audited since t0, read from its pod's log.
func (s *Scene) KeystoneAttempts(ctx context.Context, user string, t0 time.Time) ([]keystoneadmin.Authentication, error) {
	// The API takes the time to the second: start a second early.
	since := metav1.NewTime(t0.Add(-time.Second))
	log, err := s.cs.CoreV1().Pods(s.Namespace).GetLogs(KeystoneName, &corev1.PodLogOptions{Container: KeystoneName, SinceTime: &since}).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("Keystone's log: %w", err)
	}
	all, err := keystoneadmin.Authentications(log)
	if err != nil {
		return nil, err
	}
	var out []keystoneadmin.Authentication
	for _, a := range all {
		if a.User == user && !a.At.Before(t0) {
			out = append(out, a)
		}
	}
	return out, nil
}

// Object looks an object of the bucket up in the S3 stand-in; ok is false
// when there is none.
func (s *Scene) Object(ctx context.Context, key string) (obj s3store.Object, ok bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.S3Admin+"/objects/"+Bucket+"/"+url.PathEscape(key), nil)
	if err != nil {
		return obj, false, err
	}
	err = adminCall(req, &obj)
	if se, isStatus := err.(adminStatusError); isStatus && se.code == http.StatusNotFound {
		return obj, false, nil
	}
	return obj, err == nil, err
}

// adminStatusError is an admin API's answer other than 2xx.
type adminStatusError struct {
	code int
	msg  string
}

func (e adminStatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.code, e.msg) }

// adminCall sends req to a stand-in's admin API and decodes a 2xx answer
// into out, when given.
func adminCall(req *http.Request, out any) error {
	resp, err := adminClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return adminStatusError{code: resp.StatusCode, msg: string(bytes.TrimSpace(b))}
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	return nil
}
