package realnode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/release"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/debianroot"
	"github.com/c5c3/glance-operator/test/fixtures"
	"github.com/c5c3/glance-operator/test/keystoneadmin"
)

// What a scene holds, by name.
const (
	KeystonePort = 5000
	Bucket       = "glance-images"
	GlanceName   = "glance"
	BackendName  = "s3"
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
	// MultipartThresholdMiB is the backend's largeObjectSize and
	// largeObjectChunkSize.
	MultipartThresholdMiB = 5
)

// SceneImages are the images of a scene beside the chart's: the S3
// server, MariaDB and Keystone by digest, and the repository of the Glance
// images, tagged by release.
type SceneImages struct {
	S3, MariaDB, Keystone, GlanceRepository string
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
		var bin string
		if bin, errs[0] = controlplane.BinDir("seaweedfs"); errs[0] == nil {
			imgs.S3, errs[0] = reg.PushBinary(ctx, dir, "seaweedfs", filepath.Join(bin, "seaweedfs"), "test/seaweedfs", "v1")
		}
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
// Debian's Keystone, an S3 server, a MariaDB (through the MariaDB
// stand-in operator) that Keystone and Glance keep their databases in, the
// Secrets, and an S3 GlanceBackend.
type Scene struct {
	Namespace string
	// S3 is the scene's S3 server.
	S3 *S3Server
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
// server, and Keystone with the Glance's service user and the demo
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
	b.Spec.S3.Host = s.S3URL("http", S3Port)
	b.Spec.S3.Bucket = Bucket
	// Uploads of a known size above 5 MiB go multipart, in parts of 5 MiB
	// (the least glance_store takes).
	b.Spec.S3.LargeObjectSize = ptr.To[int32](MultipartThresholdMiB)
	b.Spec.S3.LargeObjectChunkSize = ptr.To[int32](MultipartThresholdMiB)
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: DBSecretName, Namespace: ns}, StringData: map[string]string{"username": "glance", "password": DBPassword}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ServiceSecretName, Namespace: ns}, StringData: map[string]string{"username": v1alpha1.DefaultServiceUsername, "password": ServicePassword}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: S3CredentialsSecret, Namespace: ns}, StringData: map[string]string{v1alpha1.S3AccessKeyIDKey: S3AccessKeyID, v1alpha1.S3SecretAccessKeyKey: S3SecretAccessKey}},
		mariadb, b,
	} {
		if err := cl.Create(ctx, obj); err != nil {
			return nil, err
		}
	}
	var err error
	if s.S3, err = e.startS3Server(ctx, ns, imgs.S3, Bucket); err != nil {
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

// adminClient is the client of Keystone's API from this process.
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

// S3URL is the S3 server's endpoint as pods see it, by scheme and port.
func (s *Scene) S3URL(scheme string, port int) string {
	return fmt.Sprintf("%s://%s.%s.svc:%d", scheme, S3ServiceName, s.Namespace, port)
}

// Object reads an object of the bucket from the S3 server; ok is false when
// there is none.
func (s *Scene) Object(ctx context.Context, key string) (obj S3Object, ok bool, err error) {
	return s.S3.Object(ctx, Bucket, key)
}

// ObjectReads counts the GETs of an object of the bucket that the S3
// server has logged: Glance's, and Object's.
func (s *Scene) ObjectReads(ctx context.Context, key string) (int, error) {
	return s.S3.ObjectReads(ctx, Bucket, key)
}

// CreateBucket creates a bucket in the S3 server, which Glance's
// credentials may use; one that exists is no error.
func (s *Scene) CreateBucket(ctx context.Context, name string) error {
	return s.S3.CreateBucket(ctx, name)
}
