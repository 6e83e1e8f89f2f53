package realnode

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/debianroot"
)

// TestGlanceImageRuns: the Glance image built from Debian's packages is
// pulled by digest and starts both launch modes' programs on the node as
// the glance user, under the restricted security context the operator
// renders (non-root 42424, read-only root filesystem, no capabilities).
func TestGlanceImageRuns(t *testing.T) {
	start := time.Now()
	dir := filepath.Join(env.Cluster.Dir, "images")
	archive := filepath.Join(dir, "glance.oci.tar")
	if _, err := debianroot.WriteGlanceImage(debianroot.Glance, archive, "openstack/glance:2025.2"); err != nil {
		t.Fatal(err)
	}
	built := time.Since(start)
	ref, err := env.Cluster.Registry.Push(t.Context(), archive, "openstack/glance", "2025.2")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Glance image %s: built in %s, pushed in %s", ref, built.Round(100*time.Millisecond), (time.Since(start) - built).Round(100*time.Millisecond))

	ns := env.Namespace(t)
	cases := []struct {
		name    string
		command []string
		want    string
	}{
		// eventlet: the glance-api server program.
		{"eventlet", []string{"glance-api", "--version"}, "30."},
		// uWSGI with its Python plugin, and the WSGI shim's imports.
		{"uwsgi", []string{"sh", "-c", "/usr/local/bin/uwsgi --version && python3 -c 'import glance.common.wsgi_app, oslo_config; print(\"wsgi shim imports ok\")' && test -x /var/lib/openstack/bin/glance-wsgi-api && id"}, "wsgi shim imports ok"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			created := time.Now()
			pod := &corev1.Pod{}
			pod.Name = tc.name
			pod.Spec = corev1.PodSpec{
				RestartPolicy:                 corev1.RestartPolicyNever,
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				SecurityContext: &corev1.PodSecurityContext{
					RunAsUser:  ptr.To(render.GlanceUID),
					RunAsGroup: ptr.To(render.GlanceUID),
				},
				Containers: []corev1.Container{{
					Name:            "glance",
					Image:           ref,
					Command:         tc.command,
					SecurityContext: Restricted(),
				}},
			}
			phase, log := env.RunPod(t, ns, pod)
			if phase != corev1.PodSucceeded || !strings.Contains(log, tc.want) {
				t.Errorf("%s: pod %s, want it to succeed printing %q; log:\n%s", tc.name, phase, tc.want, log)
			}
			if tc.name == "uwsgi" && !strings.Contains(log, "uid=42424") {
				t.Errorf("the container did not run as 42424:\n%s", log)
			}
			t.Logf("%s: pulled, started and done in %s", tc.name, time.Since(created).Round(100*time.Millisecond))
		})
	}
}
