package render

import "testing"

func TestIsOperatorAnnotation(t *testing.T) {
	for key, want := range map[string]bool{
		AnnotationPodTemplateHash: true, AnnotationAuthtokenHash: true, AnnotationDBConnectionHash: true,
		"glance.openstack.c5c3.io/anything": true, "kubectl.kubernetes.io/restartedAt": false, "example.com/glance.c5c3.io": false,
	} {
		if got := IsOperatorAnnotation(key); got != want {
			t.Errorf("IsOperatorAnnotation(%q) = %v, want %v", key, got, want)
		}
	}
}
