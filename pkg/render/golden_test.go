package render

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

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
			facts:    ConfigFacts{DefaultBackend: "primary", StoreCount: 1},
			backends: []Backend{s3Backend("primary", true)},
			dbUser:   "glance", dbPassword: "s3cr3t",
		},
		{
			name:   "full",
			glance: fullGlance(),
			facts: ConfigFacts{DefaultBackend: "ceph-s3", StoreCount: len(fullBackends), PolicyRules: map[string]string{
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
			checkGoldenDir(t, c.name, files)
		})
	}
}

// checkGoldenDir compares files, by name, with testdata/golden/<dir>, which
// must hold them and nothing else; -update rewrites the directory instead.
func checkGoldenDir(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	dir = filepath.Join("testdata", "golden", dir)
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
			t.Errorf("%s: golden file no longer rendered", filepath.Join(dir, e.Name()))
		}
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if !onDisk[name] {
			t.Errorf("%s: rendered but has no golden file (go test ./pkg/render/ -update)", path)
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if content != string(want) {
			t.Errorf("%s differs (go test ./pkg/render/ -update rewrites it)\ngot:\n%s\nwant:\n%s", path, content, want)
		}
	}
}

// goldenYAML is obj as YAML, the form the object golden files take.
func goldenYAML(t *testing.T, obj any) string {
	t.Helper()
	raw, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// checkGoldenObject compares obj, as YAML without its status, with
// testdata/golden/<dir>/<file>, the directory holding nothing else. The
// builders never set a status, but the zero HPA and HTTPRoute statuses
// still serialize (desiredReplicas: 0, parents: null), which would read as
// rendered values.
func checkGoldenObject(t *testing.T, dir, file string, obj any) {
	t.Helper()
	var fields map[string]any
	if err := yaml.Unmarshal([]byte(goldenYAML(t, obj)), &fields); err != nil {
		t.Fatal(err)
	}
	delete(fields, "status")
	checkGoldenDir(t, dir, map[string]string{file: goldenYAML(t, fields)})
}
