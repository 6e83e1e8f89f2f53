package render

import (
	"testing"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// TestGoldenPodSpecs pins the Deployment's pod template per launch mode and
// feature, and the database pods, as YAML under testdata/golden/workloads, a
// sibling of TestGolden's per-case directories.
func TestGoldenPodSpecs(t *testing.T) {
	files := map[string]string{}
	for _, c := range []struct {
		file   string
		glance *v1alpha1.Glance
	}{
		{"deployment-eventlet.yaml", minimalGlance()},
		{"deployment-uwsgi-every-knob.yaml", uwsgiEveryKnobGlance()},
		{"deployment-image-cache.yaml", imageCacheGlance()},
		{"deployment-unbounded-staging.yaml", unboundedStagingGlance()},
		{"deployment-tls-database.yaml", tlsDatabaseGlance()},
	} {
		d, err := Deployment(c.glance, testFacts())
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		files[c.file] = goldenYAML(t, d.Spec.Template)
	}
	j, err := DatabaseJob(minimalGlance(), testFacts(), DBSync, "")
	if err != nil {
		t.Fatal(err)
	}
	files["job-db-sync.yaml"] = goldenYAML(t, j)
	cj, err := DBPurgeCronJob(minimalGlance(), testFacts())
	if err != nil {
		t.Fatal(err)
	}
	files["cronjob-db-purge.yaml"] = goldenYAML(t, cj)
	checkGoldenDir(t, "workloads", files)
}
