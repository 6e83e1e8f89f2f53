package stories

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/pkg/release"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/test/realnode"
)

// TestGlanceImageRuns: the Glance images built from Debian's packages, one
// per launch mode, are pulled from the loopback registry and start their
// launch mode's programs on the node as the glance user, under the
// restricted security context the operator renders (non-root 42424,
// read-only root filesystem, no capabilities); the eventlet image has no
// uWSGI.
func TestGlanceImageRuns(t *testing.T) {
	t.Parallel()
	// setUp pushed them: one image per launch mode, tagged by release.
	refs := map[release.LaunchMode]string{}
	for _, tag := range glanceReleases {
		refs[release.LaunchModeOf(tag)] = sceneImages.GlanceRepository + ":" + tag
	}

	ns := env.Namespace(t)
	cases := []struct {
		mode    release.LaunchMode
		command []string
		want    string
	}{
		// eventlet: the glance-api server program, and no uWSGI.
		{release.Eventlet, []string{"sh", "-c", "glance-api --version && ! command -v uwsgi && echo no uwsgi"}, "no uwsgi"},
		// uWSGI with its Python plugin, and the WSGI shim's imports.
		{release.UWSGI, []string{"sh", "-c", "/usr/local/bin/uwsgi --version && python3 -c 'import glance.common.wsgi_app, oslo_config; print(\"wsgi shim imports ok\")' && test -x /var/lib/openstack/bin/glance-wsgi-api && id"}, "wsgi shim imports ok"},
	}
	for _, tc := range cases {
		t.Run(string(tc.mode), func(t *testing.T) {
			created := time.Now()
			pod := &corev1.Pod{}
			pod.Name = string(tc.mode)
			pod.Spec = corev1.PodSpec{
				RestartPolicy:                 corev1.RestartPolicyNever,
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				SecurityContext: &corev1.PodSecurityContext{
					RunAsUser:  ptr.To(render.GlanceUID),
					RunAsGroup: ptr.To(render.GlanceUID),
				},
				Containers: []corev1.Container{{
					Name:            "glance",
					Image:           refs[tc.mode],
					Command:         tc.command,
					SecurityContext: realnode.Restricted(),
				}},
			}
			phase, log := env.RunPod(t, ns, pod)
			if phase != corev1.PodSucceeded || !strings.Contains(log, tc.want) {
				t.Errorf("%s: pod %s, want it to succeed printing %q; log:\n%s", tc.mode, phase, tc.want, log)
			}
			if tc.mode == release.UWSGI && !strings.Contains(log, "uid=42424") {
				t.Errorf("the container did not run as 42424:\n%s", log)
			}
			t.Logf("%s: pulled, started and done in %s", tc.mode, time.Since(created).Round(100*time.Millisecond))
		})
	}
}
