package database

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/test/operatortest"
)

// refuse installs a ValidatingAdmissionPolicy, as another product's
// admission would, that refuses creating the resource of group in the
// scene's namespace when expression (CEL over object) holds, and waits until
// the API server enforces it on probe, an object it must refuse.
func (s *scene) refuse(group, resource, expression, message string, probe client.Object) {
	s.t.Helper()
	name := s.NS + "-" + resource
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: []string{resource}},
				},
			}}},
			Validations: []admissionv1.Validation{{Expression: "!(" + expression + ")", Message: message}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: s.NS},
			}},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := cl.Create(context.Background(), obj); err != nil {
			s.t.Fatal(err)
		}
		s.t.Cleanup(func() { _ = cl.Delete(context.Background(), obj) })
	}
	// The API server compiles the policy some time after it is created: a
	// dry run of the probe says when it enforces it, without creating it.
	probe.SetNamespace(s.NS)
	s.Eventually("the policy to refuse "+resource, func() bool {
		err := cl.Create(context.Background(), probe.DeepCopyObject().(client.Object), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), message)
	}, nil)
}

// warningsOf lists the notes of the Warning events of reason on the Glance,
// one for each time it was emitted (a series repeats its note).
func (s *scene) warningsOf(reason string) []string {
	s.t.Helper()
	return s.eventsOf(reason, corev1.EventTypeWarning)
}

// eventsOf lists the notes of the events of reason on the Glance, of type
// typ (any type when empty), one for each time it was emitted.
func (s *scene) eventsOf(reason, typ string) []string {
	s.t.Helper()
	var list eventsv1.EventList
	if err := cl.List(context.Background(), &list, client.InNamespace(s.NS)); err != nil {
		s.t.Fatal(err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Glance" && e.Reason == reason && (typ == "" || e.Type == typ) {
			notes = append(notes, e.Note)
			if e.Series != nil {
				for range e.Series.Count - 1 {
					notes = append(notes, e.Note)
				}
			}
		}
	}
	return notes
}

// TestRefusedCronJobNamesItsCause: an admission that refuses the purge
// CronJob is reported as that, DBPurgeCronJobFailed with the refusal and one
// Warning event, not as a failed purge run.
func TestRefusedCronJobNamesItsCause(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.refuse("batch", "cronjobs", "true", "cronjobs are not allowed here", &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "probe", Image: "probe"}},
		}}}}},
	})
	s.install()
	c := s.Condition(v1alpha1.ConditionDBPurgeReady, metav1.ConditionFalse, v1alpha1.ReasonDBPurgeCronJobFailed)
	if !strings.Contains(c.Message, "cronjobs are not allowed here") {
		t.Errorf("DBPurgeCronJobFailed message %q does not carry the refusal", c.Message)
	}
	s.Eventually("a DBPurgeCronJobFailed Warning", func() bool { return len(s.warningsOf(v1alpha1.ReasonDBPurgeCronJobFailed)) > 0 }, nil)
	// Passes that meet the same cause announce nothing more: two woken
	// after the Warning, each of them refused again.
	for range 2 {
		for _, p := range reconcileTrace.NextPasses(t, cl, "glance", s.ReadGlance()) {
			if p.Outcome != operatortest.OutcomeError {
				t.Fatalf("a pass after the refusal ended %s, want the refusal's error again", p)
			}
		}
	}
	if notes := s.warningsOf(v1alpha1.ReasonDBPurgeCronJobFailed); len(notes) != 1 || !strings.Contains(notes[0], "cronjobs are not allowed here") {
		t.Errorf("DBPurgeCronJobFailed Warnings %q, want one with the refusal", notes)
	}
}

// TestRefusedBackendsSecretNamesItsCause: an admission that refuses the
// backends Secret is reported as BackendsProjectionFailed, with the refusal
// and a Warning event, not as waiting for backends.
func TestRefusedBackendsSecretNamesItsCause(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	s.refuse("", "secrets", `has(object.metadata.labels) && "app.kubernetes.io/component" in object.metadata.labels && object.metadata.labels["app.kubernetes.io/component"] == "backends"`,
		"backends secrets are not allowed here", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe", Labels: map[string]string{"app.kubernetes.io/component": "backends"}}})
	s.ready(false)
	s.Glance()
	c := s.Condition(v1alpha1.ConditionBackendsReady, metav1.ConditionFalse, v1alpha1.ReasonBackendsProjectionFailed)
	if !strings.Contains(c.Message, "backends secrets are not allowed here") {
		t.Errorf("BackendsProjectionFailed message %q does not carry the refusal", c.Message)
	}
	s.Eventually("a BackendsProjectionFailed Warning", func() bool {
		return len(s.warningsOf(v1alpha1.ReasonBackendsProjectionFailed)) == 1
	}, func() string { return fmt.Sprint(s.warningsOf(v1alpha1.ReasonBackendsProjectionFailed)) })
}
