package stories

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/glanceclient"
	"github.com/c5c3/glance-operator/test/realnode"
)

// The import stories send each call of Glance's interoperable image import
// to the Glance pod they choose, by its IP, from the test process, which
// reaches pod and Service addresses through the node's bridge.

// What the import stories add to a scene.
const (
	// secondStore is a second GlanceBackend, on a bucket of its own in the
	// scene's S3: the store copy-image copies to.
	secondStore  = "s3-second"
	secondBucket = "glance-images-second"
	// importAdmin may copy images between stores, which Glance's default
	// policy leaves to a project's admins.
	importAdmin         = "demo-admin"
	importAdminPassword = "demo-admin-password"
	// importImageSize is the size of each imported image.
	importImageSize = 200 << 10
	// importTimeout bounds how long an import of such an image may take to
	// end, either way: a few seconds on the node.
	importTimeout = 2 * time.Minute
)

// importHTTP is the import stories' HTTP client: a call Glance proxies to
// another pod waits up to a minute for it.
var importHTTP = &http.Client{Timeout: 3 * time.Minute}

// glancePod is a running Glance pod and a client that sends every request
// to it.
type glancePod struct {
	name, ip string
	uid      types.UID
	*glanceclient.Client
}

// glancePods are the Glance's running pods, by name, with clients of user
// in the demo project.
func (s *scene) glancePods(t *testing.T, user, password string) []glancePod {
	t.Helper()
	token := s.keystoneToken(t, user, password)
	var pods []glancePod
	for _, p := range env.RunningPods(t, s.Namespace, realnode.GlanceName) {
		base := "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(v1alpha1.APIPort))
		pods = append(pods, glancePod{p.Name, p.Status.PodIP, p.UID, &glanceclient.Client{HTTP: importHTTP, Base: base, Token: token}})
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].name < pods[j].name })
	return pods
}

// keystoneToken authenticates user in the demo project at the scene's
// Keystone, through its Service's ClusterIP.
func (s *scene) keystoneToken(t *testing.T, user, password string) string {
	t.Helper()
	svc, err := env.CS.CoreV1().Services(s.Namespace).Get(t.Context(), "keystone", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(realnode.KeystonePort)) + "/v3"
	token, err := glanceclient.KeystoneToken(importHTTP, url, user, password, realnode.DemoProject)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// imageData is an image's data and the digests Glance and the store keep.
type imageData struct {
	bytes               []byte
	md5, sha256, sha512 string
}

func newImageData(t *testing.T, size int) imageData {
	t.Helper()
	b := make([]byte, size)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	m, s256, s512 := md5.Sum(b), sha256.Sum256(b), sha512.Sum512(b)
	return imageData{b, hex.EncodeToString(m[:]), hex.EncodeToString(s256[:]), hex.EncodeToString(s512[:])}
}

// stagedImage is an image whose data was staged through one pod.
type stagedImage struct {
	id       string
	data     imageData
	stagedOn glancePod
}

// stage creates an image named name and stages new data into it through
// pod.
func stage(t *testing.T, pod glancePod, name string) stagedImage {
	t.Helper()
	img, _, err := pod.CreateImage(name)
	if err != nil {
		t.Fatal(err)
	}
	data := newImageData(t, importImageSize)
	if r, err := pod.Stage(img.ID, data.bytes); err != nil || r.Code != http.StatusNoContent {
		t.Fatalf("stage %s through %s: %v %v", name, pod.name, r, err)
	}
	return stagedImage{img.ID, data, pod}
}

// glanceDirectImport is the body of a glance-direct import.
var glanceDirectImport = glanceclient.Import{Method: glanceclient.ImportMethod{Name: "glance-direct"}}

// stagingFile is where the kubelet keeps the staged data of image id on
// pod, on the node.
func stagingFile(pod glancePod, id string) string {
	return filepath.Join(env.EmptyDirPath(pod.uid, render.VolumeStaging), id)
}

// waitImport polls the image through c until done says its import is over
// or it records a failed import, and returns it; past importTimeout the
// test fails with what the image says.
func waitImport(t *testing.T, c *glanceclient.Client, id string, done func(glanceclient.Image) bool) glanceclient.Image {
	t.Helper()
	deadline := time.Now().Add(importTimeout)
	for {
		img, _, err := c.Image(id)
		if err != nil {
			t.Fatal(err)
		}
		if done(img) || img.FailedImport != "" {
			return img
		}
		if time.Now().After(deadline) {
			t.Fatalf("image %s: the import did not end within %s: %+v", id, importTimeout, img)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkHolds fails the test unless img is active, holds data, and gives it
// back through c with the same sha256.
func checkHolds(t *testing.T, c *glanceclient.Client, img glanceclient.Image, data imageData) {
	t.Helper()
	if img.Status != "active" || img.FailedImport != "" || img.Size != int64(len(data.bytes)) || img.Checksum != data.md5 ||
		img.OSHashAlgo != "sha512" || img.OSHashValue != data.sha512 {
		t.Errorf("image %s: %+v; want active, %d bytes, md5 %s, sha512 %s", img.ID, img, len(data.bytes), data.md5, data.sha512)
		return
	}
	sum, n, err := c.Download(img.ID)
	if err != nil || sum != data.sha256 || n != int64(len(data.bytes)) {
		t.Errorf("download of image %s: %d bytes, sha256 %s, %v; want %d bytes, %s", img.ID, n, sum, err, len(data.bytes), data.sha256)
	}
}

// importMethods are the import methods the Glance behind c offers.
func importMethods(t *testing.T, c *glanceclient.Client) []string {
	t.Helper()
	var info struct {
		Methods struct {
			Value []string `json:"value"`
		} `json:"import-methods"`
	}
	if r, err := c.JSON(http.MethodGet, "/v2/info/import", nil, &info); err != nil || r.Code != http.StatusOK {
		t.Fatalf("GET /v2/info/import: %v %v", r, err)
	}
	return info.Methods.Value
}

// glanceDirect: at two replicas, images staged through one pod and
// imported through the other become active, both ways. The staged data is
// on the staging pod's emptyDir only; the importing pod hands the call to
// it (its log says so), and it imports and clears its staging area; each
// image holds what was staged (size, checksum, os_hash_value) and
// downloads through the importing pod with its sha256. With one store
// there is no copy-image.
func (s *scene) glanceDirect(t *testing.T) {
	pods := s.glancePods(t, realnode.DemoUser, realnode.DemoPassword)
	if len(pods) != 2 {
		t.Fatalf("want two Glance pods, have %d", len(pods))
	}
	if methods := importMethods(t, pods[0].Client); !slices.Contains(methods, "glance-direct") || slices.Contains(methods, "copy-image") {
		t.Errorf("with one store, import methods %v: want glance-direct and no copy-image", methods)
	}
	type crossImport struct {
		stagedImage
		importedOn glancePod
	}
	var imports []crossImport
	for i, pair := range [][2]glancePod{{pods[0], pods[1]}, {pods[1], pods[0]}} {
		for j := range 3 {
			img := stage(t, pair[0], fmt.Sprintf("glance-direct-%d-%d", i, j))
			imports = append(imports, crossImport{img, pair[1]})
		}
	}
	for _, im := range imports {
		if _, err := os.Stat(stagingFile(im.stagedOn, im.id)); err != nil {
			t.Errorf("image %s staged through %s: %v", im.id, im.stagedOn.name, err)
		}
		if _, err := os.Stat(stagingFile(im.importedOn, im.id)); !os.IsNotExist(err) {
			t.Errorf("image %s staged through %s is in the staging area of %s too (%v)", im.id, im.stagedOn.name, im.importedOn.name, err)
		}
	}
	start := time.Now()
	for _, im := range imports {
		if r, err := im.importedOn.StartImport(im.id, glanceDirectImport); err != nil || r.Code != http.StatusAccepted {
			t.Fatalf("glance-direct import of %s (staged through %s) through %s: %v %v", im.id, im.stagedOn.name, im.importedOn.name, r, err)
		}
	}
	for _, im := range imports {
		img := waitImport(t, im.importedOn.Client, im.id, func(img glanceclient.Image) bool { return img.Status == "active" })
		checkHolds(t, im.importedOn.Client, img, im.data)
		if _, err := os.Stat(stagingFile(im.stagedOn, im.id)); img.Status == "active" && !os.IsNotExist(err) {
			t.Errorf("image %s is active, and its staged data is still on %s (%v)", im.id, im.stagedOn.name, err)
		}
	}
	t.Logf("%d images staged through one pod and imported through the other, both ways: the imports ended %s after the first import call",
		len(imports), time.Since(start).Round(100*time.Millisecond))
	for _, p := range pods {
		other := pods[0]
		if other.name == p.name {
			other = pods[1]
		}
		log := s.containerLog(t, p.name, render.ContainerAPI)
		proxied := fmt.Sprintf("Proxying POST request to host http://%s ", net.JoinHostPort(other.ip, strconv.Itoa(v1alpha1.APIPort)))
		if n := strings.Count(log, proxied); n < 3 {
			t.Errorf("%s handed %d imports to %s, want 3: its log has %q that many times", p.name, n, other.name, strings.TrimSpace(proxied))
		}
	}
}

// stagedDataLost: an image staged on a pod that a roll then replaces (a
// second GlanceBackend attached, the next story's) has lost its data once
// that pod is gone, and Glance 30 says so at once rather than by a hang:
// the import through a new pod fails with HTTP 500, as its proxy to the
// gone pod's address cannot connect, and the image stays uploading,
// neither importing nor active. Glance never lets it go: staging it again is a conflict (409),
// and deleting it fails like the import, for the delete is handed to the
// gone pod too. What docs/operations.md tells the user to do works: with
// the image's stage-host mark removed from the database it is deleted, and
// an image staged and imported anew becomes active.
func (s *scene) stagedDataLost(t *testing.T) {
	pods := s.glancePods(t, realnode.DemoUser, realnode.DemoPassword)
	lost := stage(t, pods[0], "staged-then-rolled")
	before := s.deployment(t)
	s.attachSecondStore(t)
	s.waitRollout(t, before.Generation)
	// A rolled-out Deployment's old pods may still be terminating, and
	// serving: the staged data is lost once they are gone.
	for _, p := range pods {
		if err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := env.CS.CoreV1().Pods(s.Namespace).Get(ctx, p.name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}); err != nil {
			t.Fatalf("pod %s is not gone after the roll: %v", p.name, err)
		}
	}

	now := s.glancePods(t, realnode.DemoUser, realnode.DemoPassword)
	for _, p := range now {
		for _, old := range pods {
			if p.name == old.name || p.ip == old.ip {
				t.Fatalf("after the roll pod %s (%s) is still there, or has its address", old.name, old.ip)
			}
		}
	}
	start := time.Now()
	r, err := now[0].StartImport(lost.id, glanceDirectImport)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("import of %s through %s: %v", lost.id, now[0].name, err)
	}
	t.Logf("import through %s of image %s staged on %s, gone: %s after %s", now[0].name, lost.id, pods[0].name, r, took.Round(10*time.Millisecond))
	if r.Code != http.StatusInternalServerError {
		t.Errorf("import of an image whose staging pod is gone: %s, want HTTP 500", r)
	}
	img, _, err := now[0].Image(lost.id)
	if err != nil {
		t.Fatal(err)
	}
	if img.Status != "uploading" || img.FailedImport != "" || img.ImportingToStores != "" {
		t.Errorf("after the failed import the image is %+v, want it uploading, with no import running or failed", img)
	}
	if r, err := now[1].Stage(lost.id, lost.data.bytes); err != nil || r.Code != http.StatusConflict {
		t.Errorf("staging the image again through %s: %v %v, want HTTP 409", now[1].name, r, err)
	}
	if r, err := now[1].Do(http.MethodDelete, "/v2/images/"+lost.id, nil, nil, 0); err != nil || r.Code != http.StatusInternalServerError {
		t.Errorf("deleting the image through %s: %v %v, want HTTP 500", now[1].name, r, err)
	}

	s.forgetStageHost(t, lost.id)
	if r, err := now[1].Do(http.MethodDelete, "/v2/images/"+lost.id, nil, nil, 0); err != nil || r.Code != http.StatusNoContent {
		t.Errorf("deleting the image without its stage host: %v %v, want HTTP 204", r, err)
	}
	again := stage(t, now[0], "staged-again")
	if r, err := now[1].StartImport(again.id, glanceDirectImport); err != nil || r.Code != http.StatusAccepted {
		t.Fatalf("import of %s (staged through %s) through %s: %v %v", again.id, now[0].name, now[1].name, r, err)
	}
	checkHolds(t, now[1].Client, waitImport(t, now[1].Client, again.id, func(img glanceclient.Image) bool { return img.Status == "active" }), again.data)
}

// attachSecondStore attaches secondStore, on secondBucket of the scene's
// S3, to the Glance: a copy of the scene's backend on another bucket.
func (s *scene) attachSecondStore(t *testing.T) {
	t.Helper()
	if err := s.CreateBucket(t.Context(), secondBucket); err != nil {
		t.Fatalf("create bucket %s: %v", secondBucket, err)
	}
	first := &v1alpha1.GlanceBackend{}
	if err := cl.Get(t.Context(), keyOf(s.Namespace, realnode.BackendName), first); err != nil {
		t.Fatal(err)
	}
	second := &v1alpha1.GlanceBackend{ObjectMeta: metav1.ObjectMeta{Name: secondStore, Namespace: s.Namespace}, Spec: *first.Spec.DeepCopy()}
	second.Spec.IsDefault = false
	second.Spec.S3.Bucket = secondBucket
	if err := cl.Create(t.Context(), second); err != nil {
		t.Fatal(err)
	}
}

// forgetStageHost removes the mark that says which pod staged the image
// id, as docs/operations.md tells a user whose staging pod is gone.
func (s *scene) forgetStageHost(t *testing.T, id string) {
	t.Helper()
	svc, err := env.CS.CoreV1().Services(s.Namespace).Get(t.Context(), "mariadb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.DBName = "glance", realnode.DBPassword, s.glance.Spec.Database.Database
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(realnode.MariaDBPort))
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 5*time.Second, 10*time.Second, 10*time.Second
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	res, err := db.ExecContext(t.Context(), "DELETE FROM image_properties WHERE image_id = ? AND name = 'os_glance_stage_host'", id)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("removing the stage host of image %s: %d rows, %v; want 1", id, n, err)
	}
}

// copyImage: with the second store the previous story attached, Glance
// offers copy-image, and an admin copies an image of the default store to
// the second, once naming it (stores) and once with all_stores: each copy
// lands in the second bucket with the image's data, the image's stores
// list both, and the copy is the image's (its data downloads unchanged).
func (s *scene) copyImage(t *testing.T) {
	s.setKeystoneUser(t, importAdmin, importAdminPassword, realnode.DemoProject, "admin", "member", "reader")
	pods := s.glancePods(t, importAdmin, importAdminPassword)
	if methods := importMethods(t, pods[0].Client); !slices.Contains(methods, "copy-image") {
		t.Fatalf("with two stores, import methods %v lack copy-image", methods)
	}
	for i, how := range []struct {
		name string
		body glanceclient.Import
	}{
		{"stores", glanceclient.Import{Method: glanceclient.ImportMethod{Name: "copy-image"}, Stores: []string{secondStore}}},
		{"all-stores", glanceclient.Import{Method: glanceclient.ImportMethod{Name: "copy-image"}, AllStores: true}},
	} {
		t.Run(how.name, func(t *testing.T) {
			uploader, copier := pods[i%2], pods[(i+1)%2]
			img, _, err := uploader.CreateImage("copy-" + how.name)
			if err != nil {
				t.Fatal(err)
			}
			data := newImageData(t, importImageSize)
			if r, err := uploader.UploadSized(img.ID, "", data.bytes); err != nil || r.Code != http.StatusNoContent {
				t.Fatalf("upload of %s: %v %v", img.ID, r, err)
			}
			if img, _, err = copier.Image(img.ID); err != nil || img.Stores != realnode.BackendName {
				t.Fatalf("after the upload image %s is in stores %q (%v), want %s", img.ID, img.Stores, err, realnode.BackendName)
			}
			if r, err := copier.StartImport(img.ID, how.body); err != nil || r.Code != http.StatusAccepted {
				body, _ := json.Marshal(how.body)
				t.Fatalf("import %s of %s through %s: %v %v", body, img.ID, copier.name, r, err)
			}
			img = waitImport(t, copier.Client, img.ID, func(img glanceclient.Image) bool {
				return img.ImportingToStores == "" && strings.Contains(","+img.Stores+",", ","+secondStore+",")
			})
			stores := strings.Split(img.Stores, ",")
			slices.Sort(stores)
			if want := []string{realnode.BackendName, secondStore}; !slices.Equal(stores, want) || img.FailedImport != "" {
				t.Errorf("after the copy image %s is in stores %v (failed: %q), want %v", img.ID, stores, img.FailedImport, want)
			}
			checkHolds(t, uploader.Client, img, data)
			for _, bucket := range []string{realnode.Bucket, secondBucket} {
				obj, ok, err := s.S3.Object(t.Context(), bucket, img.ID)
				if err != nil || !ok || obj.SHA256 != data.sha256 || obj.Size != int64(len(data.bytes)) {
					t.Errorf("S3 object %s/%s: present %v, %+v, %v; want sha256 %s, %d bytes", bucket, img.ID, ok, obj, err, data.sha256, len(data.bytes))
				}
			}
		})
	}
}
