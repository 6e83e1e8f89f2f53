package render

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// updateGolden is the package's one -update flag; every golden test in
// pkg/render should use it rather than define its own.
var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// goldenCase is one Glance whose rendered files are kept under
// testdata/golden/<name>/, one file per ConfigMap or Secret key.
type goldenCase struct {
	name     string
	glance   *v1alpha1.Glance
	facts    ConfigFacts
	backends []Backend
	// dbUser and dbPassword, when set, add dsn.txt.
	dbUser, dbPassword string
}

func goldenCases() []goldenCase {
	fullBackends := []Backend{s3Backend("ceph-s3", true), s3Backend("minio", false)}
	fullBackends[0].Spec.S3.Region = "eu-central-1"
	fullBackends[0].Spec.S3.BucketURLFormat = v1alpha1.BucketURLFormatVirtual
	fullBackends[0].Spec.S3.CreateBucketOnPut = true
	fullBackends[0].Spec.S3.LargeObjectSize = ptr.To[int32](200)
	fullBackends[0].Spec.S3.LargeObjectChunkSize = ptr.To[int32](20)
	fullBackends[1].Spec.ExtraOptions = map[string]v1alpha1.OptionValue{"weight": "50", "filesystem_store_chunk_size": "65536"}
	fullBackends[1].SecretAccessKey = `$ecret "with" quotes `

	return []goldenCase{
		{
			name:     "minimal",
			glance:   minimalGlance(),
			facts:    ConfigFacts{DefaultBackend: "primary"},
			backends: []Backend{s3Backend("primary", true)},
			dbUser:   "glance", dbPassword: "s3cr3t",
		},
		{
			name:   "full",
			glance: fullGlance(),
			facts: ConfigFacts{DefaultBackend: "ceph-s3", PolicyRules: map[string]string{
				"get_images":       "role:member",
				"delete_image":     "role:admin",
				"context_is_admin": "role:admin",
			}},
			backends: fullBackends,
		},
		{
			name:     "image-cache",
			glance:   imageCacheGlance(),
			facts:    ConfigFacts{DefaultBackend: "primary"},
			backends: []Backend{s3Backend("primary", true)},
		},
		{
			name:   "tls-database",
			glance: tlsDatabaseGlance(),
			facts:  ConfigFacts{DefaultBackend: "primary"},
			dbUser: "glance+svc", dbPassword: "p@ss:w/rd?#% +ü",
		},
		{
			name:   "release-2026.1",
			glance: uwsgiGlance(),
			facts:  ConfigFacts{DefaultBackend: "primary"},
		},
	}
}

func TestGolden(t *testing.T) {
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			files, err := ConfigFiles(c.glance, c.facts)
			if err != nil {
				t.Fatal(err)
			}
			if c.backends != nil {
				for _, b := range c.backends {
					if err := CheckBackend(b); err != nil {
						t.Fatal(err)
					}
				}
				if files[BackendsConfKey], err = BackendsConf(c.backends); err != nil {
					t.Fatal(err)
				}
			}
			if c.dbUser != "" {
				dsn, err := DSN(c.glance, c.dbUser, c.dbPassword)
				if err != nil {
					t.Fatal(err)
				}
				files["dsn.txt"] = dsn + "\n"
			}
			dir := filepath.Join("testdata", "golden", c.name)
			if *updateGolden {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for name, content := range files {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatalf("%v (run go test ./pkg/render/ -update to create the golden files)", err)
			}
			onDisk := map[string]bool{}
			for _, e := range entries {
				onDisk[e.Name()] = true
				if _, ok := files[e.Name()]; !ok {
					t.Errorf("%s: golden file no longer rendered", e.Name())
				}
			}
			for name, content := range files {
				if !onDisk[name] {
					t.Errorf("%s: rendered but has no golden file (go test ./pkg/render/ -update)", name)
					continue
				}
				want, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				if content != string(want) {
					t.Errorf("%s differs from %s (go test ./pkg/render/ -update rewrites it)\ngot:\n%s\nwant:\n%s", name, filepath.Join(dir, name), content, want)
				}
			}
		})
	}
}
