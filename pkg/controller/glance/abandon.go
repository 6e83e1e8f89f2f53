package glance

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/database"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
)

// hashPlaceholder stands in a name for the part the operator cannot know
// without listing the target: a content hash, a run's schedule time.
const (
	hashPlaceholder = "<hash>"
	runPlaceholder  = "<scheduled-time>"
)

// abandonedObjects names, as kind/namespace/name, what a Glance being
// deleted leaves on a deregistered target cluster: the operator cannot list
// that cluster any more, so the names come from the spec and status and the
// naming rules, with a placeholder where a name is content-addressed or
// made by the CronJob controller. They are what the Glance may have made
// there; those it never made (a second database user before any rotation)
// are not there. credentials are the Secrets holding credentials or keys to
// them, the ones whoever cleans up must not miss.
func abandonedObjects(g *v1alpha1.Glance) (credentials, others []string) {
	ns := g.Namespace
	obj := func(kind, name string) string { return kind + "/" + ns + "/" + name }
	mariadb := func(gvk schema.GroupVersionKind, name string) string {
		return obj(gvk.Kind+"."+gvk.Group, name)
	}

	// The DSN carries the database password; a slot's Secret a database
	// user's password; the backends Secret the S3 keys; the digest key
	// is what keeps the pod template's digests from being tested against
	// guessed passwords.
	credentials = append(credentials, obj("Secret", render.DBConnectionSecretName(g.Name)))
	if makesDatabaseUsers(g) {
		credentials = append(credentials,
			obj("Secret", render.DatabaseUserSecretName(g.Name, database.SlotA)),
			obj("Secret", render.DatabaseUserSecretName(g.Name, database.SlotB)))
	}
	credentials = append(credentials,
		obj("Secret", g.Name+"-backends-"+hashPlaceholder),
		obj("Secret", render.DigestKeySecretName(g.Name)))

	others = append(others,
		obj("Deployment", g.Name), obj("Service", g.Name), obj("PodDisruptionBudget", g.Name),
		obj("ConfigMap", g.Name+"-config-"+hashPlaceholder),
		obj("Job", render.DatabaseJobName(g.Name, render.DBSync)))
	if g.Status.TargetRelease != "" || g.Status.UpgradePhase != "" {
		for _, kind := range []render.DatabaseJobKind{render.DBExpand, render.DBMigrate, render.DBContract} {
			others = append(others, obj("Job", render.DatabaseJobName(g.Name, kind)))
		}
	}
	others = append(others,
		obj("CronJob", render.DBPurgeCronJobName(g.Name)),
		obj("Job", render.DBPurgeCronJobName(g.Name)+"-"+runPlaceholder))
	if g.Spec.Autoscaling != nil {
		others = append(others, obj("HorizontalPodAutoscaler", g.Name))
	}
	if g.Spec.NetworkPolicy != nil {
		others = append(others, obj("NetworkPolicy", g.Name))
	}
	if g.Spec.Gateway != nil {
		others = append(others, obj(httpRouteGVK.Kind, g.Name))
	}
	if g.Spec.Database.ClusterRef != nil {
		others = append(others, mariadb(render.DatabaseGVK, g.Name))
		slots := []database.Slot{database.SlotA}
		if makesDatabaseUsers(g) {
			slots = append(slots, database.SlotB)
		}
		for _, s := range slots {
			name := render.DatabaseUserObjectName(g.Name, s)
			others = append(others, mariadb(render.UserGVK, name), mariadb(render.GrantGVK, name))
		}
	}
	return credentials, others
}

// abandonNote is the RemoteChildrenAbandoned note: every object left
// behind, the credentials first, so that the cut to the API's bound on a
// note takes the least urgent names, never a credential; the target last.
// The resolver's whole error is in SecretsReady already.
func abandonNote(g *v1alpha1.Glance) string {
	credentials, others := abandonedObjects(g)
	var target string
	if ref := g.Spec.TargetClusterRef; ref != nil {
		target = ref.Name
	}
	note := fmt.Sprintf("left with this Glance's owner labels, those of these that exist: credentials %s; then %s (%s: a content hash); delete them on the target cluster %q, which is deregistered",
		strings.Join(credentials, ", "), strings.Join(others, ", "), hashPlaceholder, target)
	return pipeline.Truncate(note, maxEventNote)
}
