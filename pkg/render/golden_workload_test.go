package render

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// workloadGoldenDir holds the golden workloads, one YAML file each. It is a
// sibling of TestGolden's per-case directories, which that test owns whole.
var workloadGoldenDir = filepath.Join("testdata", "golden", "workloads")

// TestGoldenPodSpecs pins the Deployment's pod template per launch mode and
// feature, and the database pods, as YAML.
func TestGoldenPodSpecs(t *testing.T) {
	deployments := []struct {
		file   string
		glance *v1alpha1.Glance
	}{
		{"deployment-eventlet.yaml", minimalGlance()},
		{"deployment-uwsgi-every-knob.yaml", uwsgiEveryKnobGlance()},
		{"deployment-image-cache.yaml", imageCacheGlance()},
		{"deployment-unbounded-staging.yaml", unboundedStagingGlance()},
		{"deployment-tls-database.yaml", tlsDatabaseGlance()},
	}
	for _, c := range deployments {
		t.Run(c.file, func(t *testing.T) {
			d, err := Deployment(c.glance, testFacts())
			if err != nil {
				t.Fatal(err)
			}
			checkGoldenYAML(t, c.file, d.Spec.Template)
		})
	}
	t.Run("job-db-sync.yaml", func(t *testing.T) {
		j, err := DatabaseJob(minimalGlance(), testFacts(), DBSync, "")
		if err != nil {
			t.Fatal(err)
		}
		checkGoldenYAML(t, "job-db-sync.yaml", j)
	})
	t.Run("cronjob-db-purge.yaml", func(t *testing.T) {
		cj, err := DBPurgeCronJob(minimalGlance(), testFacts())
		if err != nil {
			t.Fatal(err)
		}
		checkGoldenYAML(t, "cronjob-db-purge.yaml", cj)
	})

	rendered := map[string]bool{"job-db-sync.yaml": true, "cronjob-db-purge.yaml": true}
	for _, c := range deployments {
		rendered[c.file] = true
	}
	entries, err := os.ReadDir(workloadGoldenDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !rendered[e.Name()] {
			t.Errorf("%s: golden file no longer rendered", filepath.Join(workloadGoldenDir, e.Name()))
		}
	}
}

func checkGoldenYAML(t *testing.T, file string, obj any) {
	t.Helper()
	got, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(workloadGoldenDir, file)
	if *updateGolden {
		if err := os.MkdirAll(workloadGoldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/render/ -update to create the golden files)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs (go test ./pkg/render/ -update rewrites it)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}
