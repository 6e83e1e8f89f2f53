//go:build linux

package conformance

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/glanceclient"
)

// uploadedImage is an image the suite put into a store.
type uploadedImage struct {
	id      string
	backend backendDef
	sha256  string
	size    int
}

func (s *suite) testLaunchMode(t *testing.T, m launchMode) {
	// Every mode starts from the original service password.
	s.h.objects.putSecret(serviceUserSecret, map[string]string{v1alpha1.DefaultServiceUserPasswordKey: servicePassword})
	s.keystone.SetUser(v1alpha1.DefaultServiceUsername, servicePassword, v1alpha1.DefaultServiceProjectName, "service", "admin")
	g := glanceSpec(m)
	r := s.renderObjects(t, g, m)
	if err := s.db.createDatabase(m.database, m.dbUser, dbPassword, m.dbTLS); err != nil {
		t.Fatal(err)
	}

	if !t.Run("db-sync", func(t *testing.T) {
		tlsBefore := s.db.status(t, "Ssl_accepts")
		s.runJob(t, r.jobs[render.DBSync].Spec.Template.Spec, "db-sync")
		if m.dbTLS {
			// The user requires X509, so the job could only log in over TLS
			// with the client certificate; the server counted handshakes.
			if after := s.db.status(t, "Ssl_accepts"); after <= tlsBefore {
				t.Errorf("database.tls %s: the server accepted no TLS connection (Ssl_accepts %d -> %d)", g.Spec.Database.TLS.Mode, tlsBefore, after)
			}
			if err := s.db.loginWithoutTLS(m.dbUser, dbPassword); err == nil {
				t.Errorf("the database user %s logs in without TLS: the TLS check proves nothing", m.dbUser)
			}
		}
		s.expectRows(t, fmt.Sprintf("SELECT COUNT(*) FROM `%s`.alembic_version", m.database), func(n int) bool { return n == 1 }, "one schema version")
		s.expectRows(t, fmt.Sprintf("SELECT COUNT(*) FROM `%s`.metadef_namespaces", m.database), func(n int) bool { return n > 0 }, "the metadefs loaded")
	}) {
		return
	}

	api := s.startAPI(t, t, "glance-api-"+m.name, r.deployment)
	anon := &glanceclient.Client{HTTP: api.client.HTTP, Base: api.client.Base}

	t.Run("unauthenticated", func(t *testing.T) {
		resp, err := anon.Get(render.HealthcheckPath)
		if err != nil || resp.Code != http.StatusOK {
			t.Errorf("GET %s without a token: %v %v, want 200", render.HealthcheckPath, resp, err)
		}
		resp, err = anon.Get("/v2/images")
		if err != nil || resp.Code != http.StatusUnauthorized {
			t.Errorf("GET /v2/images without a token: %v %v, want 401", resp, err)
		}
		// keystonemiddleware names where to authenticate: the rendered
		// www_authenticate_uri, the public endpoint when there is one.
		want := g.Spec.KeystonePublicEndpoint
		if want == "" {
			want = g.Spec.KeystoneEndpoint
		}
		if !strings.Contains(resp.Header.Get("WWW-Authenticate"), want) {
			t.Errorf("WWW-Authenticate %q does not name %s", resp.Header.Get("WWW-Authenticate"), want)
		}
	})

	t.Run("healthcheck-disable-file", func(t *testing.T) {
		// Touching the file drains the pod by hand: /healthcheck turns 503.
		path := api.hostPath(t, render.ContainerAPI, render.HealthcheckDisablePath)
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		resp, err := anon.Get(render.HealthcheckPath)
		_ = os.Remove(path)
		if err != nil || resp.Code != http.StatusServiceUnavailable {
			t.Errorf("GET %s with %s present: %v %v, want 503", render.HealthcheckPath, render.HealthcheckDisablePath, resp, err)
		}
		if resp, err := anon.Get(render.HealthcheckPath); err != nil || resp.Code != http.StatusOK {
			t.Errorf("GET %s after removing %s: %v %v, want 200", render.HealthcheckPath, render.HealthcheckDisablePath, resp, err)
		}
	})

	client := s.demoClient(t, api)

	t.Run("stores", func(t *testing.T) {
		var got struct {
			Stores []struct {
				ID          string `json:"id"`
				Description string `json:"description"`
				Default     any    `json:"default"`
			} `json:"stores"`
		}
		resp, err := client.JSON(http.MethodGet, "/v2/info/stores", nil, &got)
		if err != nil || resp.Code != http.StatusOK {
			t.Fatalf("GET /v2/info/stores: %v %v", resp, err)
		}
		var ids []string
		for _, st := range got.Stores {
			ids = append(ids, st.ID)
			// Glance writes "default": "true", and leaves it out otherwise.
			isDefault := st.Default == true || st.Default == "true"
			if want := st.ID == "s3-east"; isDefault != want {
				t.Errorf("store %s: default %v, want %v", st.ID, st.Default, want)
			}
		}
		if strings.Join(ids, ",") != "s3-east,s3-west" {
			t.Errorf("stores %v, want s3-east and s3-west (%s)", ids, resp)
		}
		// enabled_import_methods, an oslo.config bracketed list.
		var methods struct {
			ImportMethods struct {
				Value []string `json:"value"`
			} `json:"import-methods"`
		}
		resp, err = client.JSON(http.MethodGet, "/v2/info/import", nil, &methods)
		if err != nil || resp.Code != http.StatusOK {
			t.Fatalf("GET /v2/info/import: %v %v", resp, err)
		}
		// Two stores: images can be copied between them.
		if got, want := strings.Join(methods.ImportMethods.Value, ","), strings.Join(render.ImportMethods(&g.Spec, len(s.backends)), ","); got != want || !slices.Contains(methods.ImportMethods.Value, "copy-image") {
			t.Errorf("import methods %q, want %q, copy-image among them", got, want)
		}
	})

	images := map[string]*uploadedImage{}
	t.Run("upload", func(t *testing.T) {
		for i, b := range s.backends {
			t.Run(b.Name, func(t *testing.T) {
				size := []int{imageEastSize, imageWestSize}[i]
				img := s.upload(t, client, b, size, m.name)
				images[b.Name] = img
				if b.Spec.S3.LargeObjectSize != nil {
					s.uploadMultipart(t, client, b)
				}
			})
		}
	})
	east, west := images["s3-east"], images["s3-west"]
	if east == nil || west == nil {
		return
	}

	t.Run("image-cache", func(t *testing.T) {
		s.testImageCache(t, api, client, east, west, g, r)
	})

	t.Run("connection-reuse-after-chunked-upload", func(t *testing.T) {
		s.testReuseAfterChunked(t, api, client)
	})

	t.Run("glance-direct-import", func(t *testing.T) {
		s.testImport(t, api, client, g)
	})

	t.Run("rendered-options", func(t *testing.T) {
		s.testRenderedOptions(t, api, client, g, east)
	})

	// The sidecar on a broken pruner runs alongside the database jobs; it
	// is judged after them.
	brokenPruner := s.startBrokenPruner(t, r)

	t.Run("expand-migrate-contract", func(t *testing.T) {
		for _, kind := range []render.DatabaseJobKind{render.DBExpand, render.DBMigrate, render.DBContract} {
			s.runJob(t, r.jobs[kind].Spec.Template.Spec, string(kind))
			if resp, err := client.Get("/v2/images"); err != nil || resp.Code != http.StatusOK {
				t.Fatalf("after %s, GET /v2/images: %v %v", kind, resp, err)
			}
		}
	})

	t.Run("db-purge", func(t *testing.T) {
		s.testDBPurge(t, client, r, m, east, west)
	})

	t.Run("cache-maintenance-keeps-running-when-the-pruner-fails", func(t *testing.T) {
		checkBrokenPruner(t, brokenPruner)
	})

	var rotated *apiPod
	life := t
	t.Run("service-password-rotation", func(t *testing.T) {
		rotated = s.testRotation(t, life, api, r, g, m)
	})

	t.Run("sigterm", func(t *testing.T) {
		if rotated == nil {
			t.Fatal("no API pod left to stop: service-password-rotation failed")
		}
		rotated.stop(t)
	})
}

// runJob runs a Job's pod to completion.
func (s *suite) runJob(t *testing.T, spec corev1.PodSpec, name string) {
	t.Helper()
	p := s.h.newPod(t, name, spec)
	start := time.Now()
	if err := p.runToCompletion(5 * time.Minute); err != nil {
		t.Fatalf("job %s: %v", name, err)
	}
	t.Logf("job %s: %s", name, time.Since(start).Round(100*time.Millisecond))
}

func (s *suite) expectRows(t *testing.T, query string, ok func(int) bool, what string) {
	t.Helper()
	out, err := s.db.exec(query)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(out)
	if err != nil || !ok(n) {
		t.Errorf("%s: %q, want %s", query, out, what)
	}
}

// demoClient is a client of the API pod with a token of the demo user.
func (s *suite) demoClient(t *testing.T, api *apiPod) *glanceclient.Client {
	t.Helper()
	token, err := glanceclient.KeystoneToken(api.client.HTTP, s.keystone.URL(), demoUser, demoPassword, demoProject)
	if err != nil {
		t.Fatal(err)
	}
	return &glanceclient.Client{HTTP: api.client.HTTP, Base: api.client.Base, Token: token}
}

// upload creates an image and uploads size random bytes into backend b
// with a chunked PUT naming the store, then checks the image, the object in
// S3 and a download.
func (s *suite) upload(t *testing.T, c *glanceclient.Client, b backendDef, size int, mode string) *uploadedImage {
	t.Helper()
	var img glanceclient.Image
	resp, err := c.JSON(http.MethodPost, "/v2/images", map[string]any{
		"name": "conformance-" + b.Name, "disk_format": "raw", "container_format": "bare",
		"tags": []string{"conformance"}, "conformance_mode": mode,
	}, &img)
	if err != nil || resp.Code != http.StatusCreated {
		t.Fatalf("creating an image: %v %v", resp, err)
	}
	data := randomBytes(t, size)
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	resp, err = c.Upload(img.ID, b.Name, data)
	if err != nil || resp.Code != http.StatusNoContent {
		t.Fatalf("chunked upload of %d bytes to %s: %v %v", size, b.Name, resp, err)
	}
	resp, err = c.JSON(http.MethodGet, "/v2/images/"+img.ID, nil, &img)
	if err != nil || resp.Code != http.StatusOK {
		t.Fatalf("GET image: %v %v", resp, err)
	}
	if img.Status != "active" || img.Size != int64(size) || img.Stores != b.Name {
		t.Errorf("image after upload: status %q size %d stores %q, want active, %d, %s", img.Status, img.Size, img.Stores, size, b.Name)
	}
	if got, ok := b.server.ObjectSHA256(b.Spec.S3.Bucket, img.ID); !ok || got != want {
		t.Errorf("S3 object %s/%s of %s: present %v, sha256 %s, want %s", b.Spec.S3.Bucket, img.ID, b.Name, ok, got, want)
	}
	for _, other := range s.backends {
		if other.Name != b.Name {
			if _, ok := other.server.ObjectSHA256(other.Spec.S3.Bucket, img.ID); ok {
				t.Errorf("the image uploaded to %s is also in %s", b.Name, other.Name)
			}
		}
	}
	return &uploadedImage{id: img.ID, backend: b, sha256: want, size: size}
}

// uploadMultipart uploads an image of known size above the backend's
// largeObjectSize (MB): glance_store must split it into a multipart upload
// of largeObjectChunkSize parts.
func (s *suite) uploadMultipart(t *testing.T, c *glanceclient.Client, b backendDef) {
	t.Helper()
	var img glanceclient.Image
	resp, err := c.JSON(http.MethodPost, "/v2/images", map[string]any{"name": "conformance-multipart", "disk_format": "raw", "container_format": "bare"}, &img)
	if err != nil || resp.Code != http.StatusCreated {
		t.Fatalf("creating an image: %v %v", resp, err)
	}
	data := randomBytes(t, int(*b.Spec.S3.LargeObjectSize)<<20+1)
	sum := sha256.Sum256(data)
	before := b.server.MultipartUploads()
	resp, err = c.UploadSized(img.ID, b.Name, data)
	if err != nil || resp.Code != http.StatusNoContent {
		t.Fatalf("upload of %d bytes with a Content-Length to %s: %v %v", len(data), b.Name, resp, err)
	}
	if n := b.server.MultipartUploads() - before; n != 1 {
		t.Errorf("%d bytes with largeObjectSize %d MB: %d multipart uploads, want 1", len(data), *b.Spec.S3.LargeObjectSize, n)
	}
	if got, ok := b.server.ObjectSHA256(b.Spec.S3.Bucket, img.ID); !ok || got != hex.EncodeToString(sum[:]) {
		t.Errorf("the multipart object in %s: present %v, sha256 %s", b.Name, ok, got)
	}
}

func (s *suite) download(t *testing.T, c *glanceclient.Client, img *uploadedImage) {
	t.Helper()
	got, n, err := c.Download(img.id)
	if err != nil {
		t.Fatal(err)
	}
	if got != img.sha256 || n != int64(img.size) {
		t.Fatalf("download of %s: %d bytes, sha256 %s; want %d bytes, %s", img.id, n, got, img.size, img.sha256)
	}
}

func (img *uploadedImage) storeReads() int {
	return img.backend.server.ReadsOf(img.backend.Spec.S3.Bucket, img.id)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// testImageCache: a first download fills the cache, the second is served
// from it (the store is not read again); once the cache holds more than
// image_cache_max_size the sidecar runs the pruner, which evicts the least
// recently used image, and the cleaner, which removes invalid and stalled
// files.
func (s *suite) testImageCache(t *testing.T, api *apiPod, c *glanceclient.Client, east, west *uploadedImage, g *v1alpha1.Glance, r rendered) {
	cacheDir := api.volumes[render.VolumeImageCache]
	maxSize := render.ImageCacheMaxSize(g.Spec.ImageCache.Size)
	if !strings.Contains(r.files[render.GlanceAPIConfKey], fmt.Sprintf("image_cache_max_size = %d", maxSize)) {
		t.Fatalf("glance-api.conf does not set image_cache_max_size = %d", maxSize)
	}
	if east.size > int(maxSize) || east.size+west.size <= int(maxSize) {
		t.Fatalf("test sizes: one image must fit under image_cache_max_size %d, two must not", maxSize)
	}

	reads := east.storeReads()
	s.download(t, c, east)
	if got := east.storeReads(); got != reads+1 {
		t.Errorf("first download of %s: %d store reads, want %d", east.id, got, reads+1)
	}
	if !waitFor(15*time.Second, func() bool { return exists(filepath.Join(cacheDir, east.id)) }) {
		t.Fatalf("the first download did not put %s into the image cache; glance-api's output:\n%s", east.id, api.api.tail(30))
	}
	reads = east.storeReads()
	s.download(t, c, east)
	if got := east.storeReads(); got != reads {
		t.Errorf("second download of %s read the store (%d reads, had %d): not a cache hit", east.id, got, reads)
	}

	// What the cleaner must remove: an invalid file and an incomplete one
	// stalled for two days.
	old := time.Now().Add(-48 * time.Hour)
	var planted []string
	for _, sub := range []string{"invalid", "incomplete"} {
		dir := filepath.Join(cacheDir, sub)
		if !exists(dir) {
			t.Fatalf("glance-api did not create %s in the image cache", sub)
		}
		f := filepath.Join(dir, "00000000-0000-0000-0000-0000000000"+sub[:2])
		if err := os.WriteFile(f, []byte("stale"), 0o644); err != nil {
			t.Fatal(err)
		}
		_ = os.Chown(f, int(render.GlanceUID), int(render.GlanceUID))
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
		planted = append(planted, f)
	}

	s.download(t, c, west)
	if !waitFor(60*time.Second, func() bool {
		return !exists(filepath.Join(cacheDir, east.id)) && exists(filepath.Join(cacheDir, west.id)) &&
			!exists(planted[0]) && !exists(planted[1])
	}) {
		t.Fatalf("with %d + %d bytes cached (image_cache_max_size %d), the sidecar did not prune %s and clean %v within 60s; cache: %v; its output:\n%s",
			east.size, west.size, maxSize, east.id, planted, listDir(cacheDir), api.sidecar.tail(30))
	}
	if n := cachedBytes(cacheDir); n > maxSize {
		t.Errorf("after pruning the cache holds %d bytes, more than image_cache_max_size %d", n, maxSize)
	}
	logs := api.sidecar.logs()
	if !strings.Contains(logs, "running glance-cache-pruner and glance-cache-cleaner") || strings.Contains(logs, "failed") {
		t.Errorf("cache-maintenance output:\n%s", logs)
	}
	reads = east.storeReads()
	s.download(t, c, east)
	if got := east.storeReads(); got != reads+1 {
		t.Errorf("download of the evicted %s: %d store reads, want %d", east.id, got, reads+1)
	}
}

func listDir(dir string) []string {
	var out []string
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, fmt.Sprintf("%s(%d)", rel, fi.Size()))
		}
		return nil
	})
	return out
}

// cachedBytes is the size of the cached images: the regular files at the
// top of the cache directory other than the sqlite database.
func cachedBytes(dir string) int64 {
	entries, _ := os.ReadDir(dir)
	var n int64
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && !strings.HasPrefix(e.Name(), "cache.db") {
			n += fi.Size()
		}
	}
	return n
}

var consecutivePattern = regexp.MustCompile(`glance-cache-maintenance failed: (\d+) consecutive`)

// startBrokenPruner runs the cache-maintenance container on an image whose
// glance-cache-pruner always fails, maintaining every second.
func (s *suite) startBrokenPruner(t *testing.T, r rendered) *process {
	spec := r.deployment.Spec.Template.Spec.DeepCopy()
	c := container(t, *spec, render.ContainerCacheMaintenance)
	spec.Containers = []corev1.Container{c}
	p := s.h.newPod(t, "cache-maintenance-broken", *spec)
	pr, err := p.start(c, runOptions{
		env: []string{"CACHE_POLL_SECONDS=1", "CACHE_MAINTENANCE_INTERVAL_SECONDS=1"},
		image: map[string]imageFile{"/usr/bin/glance-cache-pruner": {
			content: "#!/bin/sh\necho 'glance-cache-pruner: broken on purpose by the conformance suite' >&2\nexit 1\n", mode: 0o755,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

// checkBrokenPruner: every failed run is logged with a climbing count, and
// the loop keeps running.
func checkBrokenPruner(t *testing.T, pr *process) {
	var counts []int
	ok := waitFor(90*time.Second, func() bool {
		counts = counts[:0]
		for _, m := range consecutivePattern.FindAllStringSubmatch(pr.logs(), -1) {
			n, _ := strconv.Atoi(m[1])
			counts = append(counts, n)
		}
		return len(counts) >= 3 || !pr.running()
	})
	if !pr.running() {
		t.Fatalf("cache-maintenance exited (%v) after a failed run; its output:\n%s", pr.err, pr.tail(30))
	}
	if !ok {
		t.Fatalf("cache-maintenance logged %v failure counts in 90s, want 3; its output:\n%s", counts, pr.tail(30))
	}
	for i, n := range counts {
		if n != i+1 {
			t.Fatalf("failure counts %v, want 1, 2, 3, …; its output:\n%s", counts, pr.tail(30))
		}
	}
	_ = pr.cmd.Process.Signal(syscall.SIGTERM)
	if exited, _ := pr.wait(10 * time.Second); !exited {
		t.Errorf("cache-maintenance did not exit within 10s of SIGTERM")
	}
}

// testDBPurge deletes an image, ages its soft-deleted rows past ageInDays,
// and runs the purge CronJob's command: the image's rows in the dependent
// tables are gone (the images table itself has its own purge command,
// OSSN-0075), the other image's are not.
func (s *suite) testDBPurge(t *testing.T, c *glanceclient.Client, r rendered, m launchMode, gone, kept *uploadedImage) {
	resp, err := c.Do(http.MethodDelete, "/v2/images/"+gone.id, nil, nil, 0)
	if err != nil || resp.Code != http.StatusNoContent {
		t.Fatalf("deleting image %s: %v %v", gone.id, resp, err)
	}
	if _, ok := gone.backend.server.ObjectSHA256(gone.backend.Spec.S3.Bucket, gone.id); ok {
		t.Errorf("deleting image %s left its object in %s", gone.id, gone.backend.Name)
	}
	db := "`" + m.database + "`."
	tables := []string{"image_locations", "image_properties", "image_tags"}
	count := func(id string) int {
		total := 0
		for _, tbl := range tables {
			out, err := s.db.exec(fmt.Sprintf("SELECT COUNT(*) FROM %s%s WHERE image_id = %s", db, tbl, sqlString(id)))
			if err != nil {
				t.Fatal(err)
			}
			n, _ := strconv.Atoi(out)
			total += n
		}
		return total
	}
	before, keptBefore := count(gone.id), count(kept.id)
	if before == 0 || keptBefore == 0 {
		t.Fatalf("images %s and %s have %d and %d rows in %v before the purge", gone.id, kept.id, before, keptBefore, tables)
	}
	for _, tbl := range tables {
		if _, err := s.db.exec(fmt.Sprintf("UPDATE %s%s SET deleted_at = NOW() - INTERVAL 2 DAY WHERE image_id = %s AND deleted = 1", db, tbl, sqlString(gone.id))); err != nil {
			t.Fatal(err)
		}
	}
	s.runJob(t, r.purge.Spec.JobTemplate.Spec.Template.Spec, "db-purge")
	if n := count(gone.id); n != 0 {
		t.Errorf("after db purge, the deleted image %s still has %d rows in %v", gone.id, n, tables)
	}
	if n := count(kept.id); n != keptBefore {
		t.Errorf("db purge removed rows of the live image %s: %d, had %d", kept.id, n, keptBefore)
	}
}

// testRotation rotates the service user's password in Keystone and in its
// Secret, checks the render rolls the pods, and that the new pod's glance-api
// authenticates with the new password (Keystone accepts nothing else).
//
// The new pod lives as long as life, for the SIGTERM case after this one.
func (s *suite) testRotation(t, life *testing.T, old *apiPod, r rendered, g *v1alpha1.Glance, m launchMode) *apiPod {
	rotatedAt := time.Now()
	s.keystone.SetUser(v1alpha1.DefaultServiceUsername, rotatedServicePassword, v1alpha1.DefaultServiceProjectName, "service", "admin")
	s.h.objects.putSecret(serviceUserSecret, map[string]string{v1alpha1.DefaultServiceUserPasswordKey: rotatedServicePassword})
	r2 := s.renderObjects(t, g, m)
	before := r.deployment.Spec.Template.Annotations[render.AnnotationAuthtokenHash]
	after := r2.deployment.Spec.Template.Annotations[render.AnnotationAuthtokenHash]
	if before == "" || before == after {
		t.Fatalf("the pod template's %s is %q before and %q after the rotation: the pods would not roll", render.AnnotationAuthtokenHash, before, after)
	}
	old.stop(t)
	api := s.startAPI(t, life, "glance-api-"+m.name+"-rotated", r2.deployment)
	c := s.demoClient(t, api)
	if resp, err := c.Get("/v2/images"); err != nil || resp.Code != http.StatusOK {
		t.Fatalf("GET /v2/images after the rotation: %v %v; glance-api's output:\n%s", resp, err, api.api.tail(30))
	}
	attempts := s.keystone.AttemptsSince(v1alpha1.DefaultServiceUsername, rotatedAt)
	if len(attempts) == 0 {
		t.Fatal("glance-api validated a token without authenticating its service user")
	}
	for _, a := range attempts {
		if !a.OK || a.Password != rotatedServicePassword {
			t.Errorf("after the rotation the service user authenticated with the old or a wrong password (accepted: %v)", a.OK)
		}
	}
	return api
}

// testImport stages an image and imports it into the non-default store with
// glance-direct: the staging directory, the tasks work directory and the
// background task runner (native threads under uWSGI) all take part, and so
// do the import plugins.
func (s *suite) testImport(t *testing.T, api *apiPod, c *glanceclient.Client, g *v1alpha1.Glance) {
	var img glanceclient.Image
	resp, err := c.JSON(http.MethodPost, "/v2/images", map[string]any{"name": "conformance-import", "disk_format": "raw", "container_format": "bare"}, &img)
	if err != nil || resp.Code != http.StatusCreated {
		t.Fatalf("creating an image: %v %v", resp, err)
	}
	data := randomBytes(t, 1<<20+17)
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	h := http.Header{}
	h.Set("Content-Type", "application/octet-stream")
	resp, err = c.Do(http.MethodPut, "/v2/images/"+img.ID+"/stage", h, glanceclient.Chunked(data, 64<<10), -1)
	if err != nil || resp.Code != http.StatusNoContent {
		t.Fatalf("staging: %v %v", resp, err)
	}
	staged := filepath.Join(api.hostPath(t, render.ContainerAPI, render.StagingDir), img.ID)
	if !exists(staged) {
		t.Errorf("the staged data is not in the staging volume (%s)", render.StagingDir)
	}
	west := s.backends[1]
	resp, err = c.JSON(http.MethodPost, "/v2/images/"+img.ID+"/import", map[string]any{
		"method": map[string]string{"name": "glance-direct"}, "stores": []string{west.Name},
	}, nil)
	if err != nil || resp.Code != http.StatusAccepted {
		t.Fatalf("import: %v %v", resp, err)
	}
	var got map[string]any
	if !waitFor(60*time.Second, func() bool {
		got = nil
		_, _ = c.JSON(http.MethodGet, "/v2/images/"+img.ID, nil, &got)
		return got["status"] == "active" || got["os_glance_failed_import"] != nil && got["os_glance_failed_import"] != ""
	}) || got["status"] != "active" {
		t.Fatalf("the glance-direct import did not finish within 60s: %v; glance-api's output:\n%s", got, api.api.tail(40))
	}
	if got["stores"] != west.Name {
		t.Errorf("imported into %v, want %s", got["stores"], west.Name)
	}
	if sha, ok := west.server.ObjectSHA256(west.Spec.S3.Bucket, img.ID); !ok || sha != want {
		t.Errorf("the imported object in %s: present %v, sha256 %s, want %s", west.Name, ok, sha, want)
	}
	// The task deletes the staged data after it marked the image active.
	if !waitFor(10*time.Second, func() bool { return !exists(staged) }) {
		t.Errorf("the import left the staged data behind")
	}
	if len(g.Spec.Plugins) > 0 && got[injectedProperty] != "yes" {
		t.Errorf("the inject_image_metadata plugin did not set %s: %v", injectedProperty, got)
	}
}

// testRenderedOptions checks that the optional files and options of the
// spec took effect: policy.yaml, logging.conf, extraConfig.
func (s *suite) testRenderedOptions(t *testing.T, api *apiPod, c *glanceclient.Client, g *v1alpha1.Glance, img *uploadedImage) {
	// policy.yaml: communitize_image is the demo user's by default.
	want := http.StatusOK
	if p := g.Spec.PolicyOverrides; p != nil && p.Rules[deniedRule] == "!" {
		want = http.StatusForbidden
	}
	resp, err := c.JSON(http.MethodPatch, "/v2/images/"+img.id, []map[string]any{{"op": "replace", "path": "/visibility", "value": "community"}}, nil)
	if err != nil || resp.Code != want {
		t.Errorf("PATCH of the visibility to community (policy %s): %v %v, want %d", deniedRule, resp, err, want)
	}
	if l := g.Spec.Logging; l != nil {
		logs := api.api.logs()
		if _, ok := l.PerLoggerLevels[cacheLogger]; ok && !strings.Contains(logs, "Cache hit for image '"+img.id+"'") {
			t.Errorf("%s at DEBUG did not log the cache hit of %s", cacheLogger, img.id)
		}
		if l.Format == v1alpha1.LogFormatJSON {
			n := 0
			for _, line := range strings.Split(logs, "\n") {
				var rec map[string]any
				if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &rec) == nil && rec["message"] != nil {
					n++
				}
			}
			if n == 0 {
				t.Errorf("format json: no JSON log line in glance-api's output:\n%s", api.api.tail(20))
			}
		}
	}
	var got map[string]any
	if resp, err := c.JSON(http.MethodGet, "/v2/images/"+img.id, nil, &got); err != nil || resp.Code != http.StatusOK {
		t.Fatalf("GET image: %v %v", resp, err)
	}
	_, shown := got["direct_url"]
	if want := g.Spec.ExtraConfig["DEFAULT"]["show_image_direct_url"] == "true"; shown != want {
		t.Errorf("direct_url shown %v, want %v (show_image_direct_url, extraConfig over the rendered false)", shown, want)
	}
}

// hostPath is where a path of a container's file system is on the host:
// inside the volume mounted at the longest matching mountPath.
func (p *pod) hostPath(t *testing.T, containerName, path string) string {
	t.Helper()
	c := container(t, p.spec, containerName)
	best, host := "", ""
	for _, m := range c.VolumeMounts {
		mp := strings.TrimSuffix(m.MountPath, "/")
		if (path == mp || strings.HasPrefix(path, mp+"/")) && len(mp) > len(best) {
			best, host = mp, filepath.Join(p.volumes[m.Name], strings.TrimPrefix(path, mp))
		}
	}
	if best == "" {
		t.Fatalf("container %s mounts no volume at %s", containerName, path)
	}
	return host
}

// testReuseAfterChunked sends a chunked upload on one connection, as a
// client with a connection pool does, and then another request on the same
// connection, unless the server announced it closes it. A server that drops
// a kept-alive connection silently makes a client's next POST fail.
func (s *suite) testReuseAfterChunked(t *testing.T, api *apiPod, c *glanceclient.Client) {
	var img glanceclient.Image
	resp, err := c.JSON(http.MethodPost, "/v2/images", map[string]any{"name": "conformance-reuse", "disk_format": "raw", "container_format": "bare"}, &img)
	if err != nil || resp.Code != http.StatusCreated {
		t.Fatalf("creating an image: %v %v", resp, err)
	}
	conn, err := api.ns.dial(context.Background(), apiAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(conn)
	put, _ := http.NewRequest(http.MethodPut, "http://"+apiAddr+"/v2/images/"+img.ID+"/file", glanceclient.Chunked(randomBytes(t, 100<<10), 16<<10))
	put.ContentLength = -1
	put.Header.Set("Content-Type", "application/octet-stream")
	put.Header.Set("X-Auth-Token", c.Token)
	if err := put.Write(conn); err != nil {
		t.Fatal(err)
	}
	first, err := http.ReadResponse(br, put)
	if err != nil {
		t.Fatalf("response to the chunked upload: %v", err)
	}
	_, _ = io.Copy(io.Discard, first.Body)
	first.Body.Close()
	if first.StatusCode != http.StatusNoContent {
		t.Fatalf("chunked upload: HTTP %d", first.StatusCode)
	}
	if first.Close {
		return // announced: the client opens a new connection
	}
	get, _ := http.NewRequest(http.MethodGet, "http://"+apiAddr+render.HealthcheckPath, nil)
	if err := get.Write(conn); err != nil {
		t.Fatalf("the server kept the connection alive after the chunked upload (no Connection: close), but writing the next request failed: %v", err)
	}
	second, err := http.ReadResponse(br, get)
	if err != nil {
		t.Fatalf("the server kept the connection alive after the chunked upload (no Connection: close), but the next request on it failed: %v", err)
	}
	second.Body.Close()
	if second.StatusCode != http.StatusOK {
		t.Errorf("GET %s on the reused connection: HTTP %d", render.HealthcheckPath, second.StatusCode)
	}
}
