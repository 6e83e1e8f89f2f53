package glance

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/database"
	"github.com/c5c3/glance-operator/pkg/render"
)

// SlotKey is the key of the {name}-db-connection Secret that names the
// database user slot its DSN connects as.
const SlotKey = "slot"

// slotObjects is what exists of a database user slot.
type slotObjects struct {
	secret      *corev1.Secret
	user, grant *unstructured.Unstructured
}

func (o slotObjects) exists() bool { return o.secret != nil || o.user != nil || o.grant != nil }

// username is the slot's SQL user: its Secret's, or, for slot A of a
// Glance from before the slots, its User's; the credentials' user of the
// slot when it has neither yet.
func (o slotObjects) username(p *pass, s database.Slot) string {
	switch {
	case o.secret != nil:
		return string(o.secret.Data[render.DatabaseUserUsernameKey])
	case o.user != nil:
		if name, _, _ := unstructured.NestedString(o.user.Object, "spec", "name"); name != "" {
			return name
		}
	}
	return s.Username(p.credentials.username)
}

// ensureDatabaseUsers keeps the two database users a managed Glance with
// static credentials alternates between (database.Slot): a new password in
// the credentials Secret goes to the slot the pods do not connect as; the
// DSN names that slot once its user is Ready, and the other slot's user is
// dropped once no pod or Job connects as it. It leaves the DSN in p.dsn and
// its slot in p.dbSlot. Brownfield databases and Dynamic credentials have
// one user, the credentials Secret's, and leave both empty. The
// DBConnectionSecret step runs it, as the slot decides the DSN.
func ensureDatabaseUsers(ctx context.Context, g *v1alpha1.Glance, p *pass) error {
	if !makesDatabaseUsers(g) || p.credentials.dsnError != "" {
		return nil
	}
	if installed, err := p.cluster.Serves(render.UserGVK); err != nil || !installed {
		// The Database step says that the API is missing.
		return err
	}
	if err := refuseSharedSQLUsers(ctx, p, g, database.SlotA.Username(p.credentials.username), database.SlotB.Username(p.credentials.username)); err != nil {
		return err
	}
	slots := map[database.Slot]slotObjects{}
	for _, s := range []database.Slot{database.SlotA, database.SlotB} {
		o, err := readSlot(ctx, g, p, s)
		if err != nil {
			return err
		}
		slots[s] = o
	}
	var live corev1.Secret
	if err := p.cluster.Client.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: render.DBConnectionSecretName(g.Name)}, &live); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get Secret %s: %w", render.DBConnectionSecretName(g.Name), err)
	}
	obs := database.UsersObservation{Active: database.Slot(live.Data[SlotKey])}
	obs.A, obs.B = slotState(g, p, database.SlotA, slots[database.SlotA]), slotState(g, p, database.SlotB, slots[database.SlotB])
	var unsettled string
	if other := obs.Active.Other(); obs.Active != "" && slots[other].exists() {
		// Only the other slot's drop waits for the pods to settle: most
		// passes have no other slot, and read no Deployment or Job here.
		liveHash := keyedDigest(p.digestKey, string(live.Data[ConnectionKey]))
		var recheck time.Duration
		var err error
		if unsettled, recheck, err = usersUnsettled(ctx, g, p, liveHash); err != nil {
			return err
		}
		obs.Settled = unsettled == ""
		p.recheckAfter(recheck)
	}
	plan := database.PlanUsers(obs)
	if obs.Active != "" && plan.Active != obs.Active {
		// The switch itself: the pods roll off the old user from now.
		unsettled = fmt.Sprintf("Deployment %s does not run the new connection yet", g.Name)
	}
	// A rotation that waits says what for: DatabaseReady carries it.
	switch other := plan.Active.Other(); {
	case plan.Waiting != "" && unsettled != "":
		p.rotationWait = plan.Waiting + ": " + unsettled
	case plan.Waiting != "":
		p.rotationWait = plan.Waiting
	case unsettled != "":
		p.rotationWait = fmt.Sprintf("database user %s (slot %s) is dropped once no pod or Job connects as it: %s",
			slots[other].username(p, other), other, unsettled)
	}

	if plan.Retire != "" {
		if err := retireSlot(ctx, g, p, plan.Retire, slots[plan.Retire]); err != nil {
			return err
		}
	}
	// The DSN is the active slot's user as its Secret holds it: one of an
	// older password, or an older user name, until the pods roll off it.
	user, password := slots[plan.Active].username(p, plan.Active), ""
	if active := slots[plan.Active]; active.secret != nil {
		password = string(active.secret.Data[render.DatabaseUserPasswordKey])
	}
	if plan.Provision != "" {
		written, err := provisionSlot(ctx, g, p, plan.Provision, slots[plan.Provision], plan.Provision != plan.Active)
		if err != nil {
			return err
		}
		if plan.Provision == plan.Active {
			user, password = plan.Active.Username(p.credentials.username), written
		}
	}
	if password == "" {
		var err error
		if password, err = readDBPassword(ctx, g, p); err != nil {
			return err
		}
	}
	if plan.Active != obs.Active && obs.Active != "" {
		announce(ctx, p, g, nil, corev1.EventTypeNormal, v1alpha1.EventDatabaseUserSwitched, "Rotate",
			"The pods roll onto database user %s (slot %s), Ready with the new password; user %s is dropped once no pod connects as it",
			user, plan.Active, slots[obs.Active].username(p, obs.Active))
	}
	dsn, err := render.DSN(g, user, password)
	if err != nil {
		// The Secrets step read the same spec into a DSN; only the user
		// differs, which the DSN escapes.
		return fmt.Errorf("the database connection of user slot %s: %w", plan.Active, err)
	}
	p.dsn, p.dbSlot, p.dbUser = dsn, plan.Active, user
	p.credentials.dsnHash = keyedDigest(p.digestKey, dsn)
	return nil
}

// makesDatabaseUsers reports whether the operator makes g's database users:
// a managed database with static credentials.
func makesDatabaseUsers(g *v1alpha1.Glance) bool {
	return g.Spec.Database.ClusterRef != nil && g.Spec.Database.CredentialsMode != v1alpha1.CredentialsModeDynamic
}

// readSlot reads what exists of a slot; an object of it that is not g's is
// a foreignObjectError.
func readSlot(ctx context.Context, g *v1alpha1.Glance, p *pass, s database.Slot) (slotObjects, error) {
	var o slotObjects
	secret := &corev1.Secret{}
	switch err := p.cluster.Client.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: render.DatabaseUserSecretName(g.Name, s)}, secret); {
	case err == nil:
		o.secret = secret
	case !apierrors.IsNotFound(err):
		return o, fmt.Errorf("get Secret %s: %w", render.DatabaseUserSecretName(g.Name, s), err)
	}
	key := client.ObjectKey{Namespace: g.Namespace, Name: render.DatabaseUserObjectName(g.Name, s)}
	var err error
	if o.user, _, _, err = getOptional(ctx, p.cluster, p.cluster.Client, render.UserGVK, key); err != nil {
		return o, err
	}
	if o.grant, _, _, err = getOptional(ctx, p.cluster, p.cluster.Client, render.GrantGVK, key); err != nil {
		return o, err
	}
	for _, obj := range []struct {
		kind   string
		exists bool
		obj    client.Object
	}{{"Secret", o.secret != nil, o.secret}, {render.UserGVK.Kind, o.user != nil, o.user}, {render.GrantGVK.Kind, o.grant != nil, o.grant}} {
		if obj.exists {
			if err := refuseForeign(obj.obj, obj.kind, g); err != nil {
				return o, err
			}
		}
	}
	return o, nil
}

// slotState is what PlanUsers reads of a slot. A slot holds the password
// when its Secret holds the credentials Secret's password for the slot's
// user; slot A's User of an operator that made one user follows the
// credentials Secret itself, so it holds it too.
func slotState(g *v1alpha1.Glance, p *pass, s database.Slot, o slotObjects) database.SlotState {
	st := database.SlotState{Exists: o.exists()}
	user := s.Username(p.credentials.username)
	switch {
	case o.secret != nil:
		st.Current = slotSecretCurrent(p, s, o.secret)
	case o.user != nil:
		name, _, _ := unstructured.NestedString(o.user.Object, "spec", "name")
		ref, _, _ := unstructured.NestedString(o.user.Object, "spec", "passwordSecretKeyRef", "name")
		st.Current = s == database.SlotA && name == user && ref == g.Spec.Database.SecretRef.Name
	}
	if o.user != nil && o.grant != nil && o.user.GetDeletionTimestamp() == nil && o.grant.GetDeletionTimestamp() == nil {
		us, _, _ := readyCondition(o.user)
		gs, _, _ := readyCondition(o.grant)
		st.Ready = us == string(metav1.ConditionTrue) && gs == string(metav1.ConditionTrue)
	}
	return st
}

// provisionSlot makes the slot's Secret hold the credentials Secret's user
// and password, and, for a slot the DSN does not name yet, applies its User
// and Grant (the Database step applies the active slot's). It returns the
// password.
func provisionSlot(ctx context.Context, g *v1alpha1.Glance, p *pass, s database.Slot, o slotObjects, standby bool) (string, error) {
	password, err := writeSlotSecret(ctx, g, p, s, o, standby)
	if err != nil || !standby {
		return password, err
	}
	for _, obj := range render.DatabaseUserObjects(g, s, s.Username(p.credentials.username)) {
		if _, err := applyDatabaseObject(ctx, p, g, obj); err != nil {
			return "", err
		}
	}
	return password, nil
}

// writeSlotSecret makes the slot's Secret hold the credentials Secret's
// user and password, and returns the password.
func writeSlotSecret(ctx context.Context, g *v1alpha1.Glance, p *pass, s database.Slot, o slotObjects, standby bool) (string, error) {
	if o.secret != nil && slotSecretCurrent(p, s, o.secret) {
		return string(o.secret.Data[render.DatabaseUserPasswordKey]), nil
	}
	password, err := readDBPassword(ctx, g, p)
	if err != nil {
		return "", err
	}
	if standby && o.secret == nil {
		announce(ctx, p, g, nil, corev1.EventTypeNormal, v1alpha1.EventDatabaseUserCreating, "Rotate",
			"The database password changed: making database user %s (slot %s) with it, for the pods to roll onto once it is Ready",
			s.Username(p.credentials.username), s)
	}
	data := map[string][]byte{
		render.DatabaseUserUsernameKey: []byte(s.Username(p.credentials.username)),
		render.DatabaseUserPasswordKey: []byte(password),
	}
	if err := ensureSecret(ctx, p, g, render.DatabaseUserSecretName(g.Name, s), componentDatabase, data); err != nil {
		return "", err
	}
	return password, nil
}

// readDBPassword returns the credentials Secret's database password,
// reading the credentials when this pass took them from the cache of what
// was derived from them, which keeps no password.
func readDBPassword(ctx context.Context, g *v1alpha1.Glance, p *pass) (string, error) {
	if p.dbPassword != "" && keyedDigest(p.digestKey, p.dbPassword) == p.credentials.dbPasswordHash {
		return p.dbPassword, nil
	}
	p.cluster.Forget(credentialsDerivation(g))
	if err := deriveCredentials(ctx, g, p); err != nil {
		return "", err
	}
	if p.dbPassword == "" {
		return "", fmt.Errorf("the database credentials changed during the pass")
	}
	return p.dbPassword, nil
}

// slotSecretCurrent reports whether a slot's Secret holds the credentials
// Secret's password for the slot's user.
func slotSecretCurrent(p *pass, s database.Slot, secret *corev1.Secret) bool {
	return string(secret.Data[render.DatabaseUserUsernameKey]) == s.Username(p.credentials.username) &&
		keyedDigest(p.digestKey, string(secret.Data[render.DatabaseUserPasswordKey])) == p.credentials.dbPasswordHash
}

// retireSlot deletes the slot's User and Grant, which drops its database
// user, and its Secret once they are gone.
func retireSlot(ctx context.Context, g *v1alpha1.Glance, p *pass, s database.Slot, o slotObjects) error {
	gone := true
	for _, u := range []*unstructured.Unstructured{o.user, o.grant} {
		if u == nil {
			continue
		}
		gone = false
		if u.GetDeletionTimestamp() != nil {
			continue
		}
		if err := p.cluster.Client.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		if u.GetKind() == render.UserGVK.Kind {
			announce(ctx, p, g, u, corev1.EventTypeNormal, v1alpha1.EventDatabaseUserDropped, "Rotate",
				"No pod connects as database user %s (slot %s) anymore: dropping it", o.username(p, s), s)
		}
	}
	if gone && o.secret != nil {
		if err := p.cluster.Client.Delete(ctx, o.secret); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Secret %s: %w", o.secret.Name, err)
		}
	}
	return nil
}

// usersUnsettled says what may still connect with another DSN than the
// live one, whose keyed digest is dsnHash; empty once nothing may: the
// Deployment has rolled out onto it and its old pods are gone, and no schema
// Job or purge run (each started on the DSN of its time) runs. Where the API
// server does not count terminating pods, the old pods' grace period after
// the roll stands in, and recheck is when it is over.
func usersUnsettled(ctx context.Context, g *v1alpha1.Glance, p *pass, dsnHash string) (waiting string, recheck time.Duration, _ error) {
	for _, kind := range []database.JobKind{database.Sync, database.Expand, database.Migrate, database.Contract} {
		var j batchv1.Job
		name := render.DatabaseJobName(g.Name, render.DatabaseJobKind(kind))
		err := p.cluster.Client.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: name}, &j)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return "", 0, fmt.Errorf("get Job %s: %w", name, err)
		case j.Status.Active > 0:
			return fmt.Sprintf("Job %s runs", name), 0, nil
		}
	}
	var runs batchv1.JobList
	if err := p.cluster.Client.List(ctx, &runs, client.InNamespace(g.Namespace), client.MatchingFields{v1alpha1.IndexChildComponent: render.ChildComponent(g.Name, render.ComponentDBPurge)}); err != nil {
		return "", 0, fmt.Errorf("list the purge runs: %w", err)
	}
	for i := range runs.Items {
		if j := &runs.Items[i]; !jobFinished(j) {
			// A purge is bounded by its deadline, so this wait is too.
			return fmt.Sprintf("purge run %s runs", j.Name), 0, nil
		}
	}
	var d appsv1.Deployment
	err := p.cluster.Client.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: g.Name}, &d)
	switch {
	case apierrors.IsNotFound(err):
		return "", 0, nil
	case err != nil:
		return "", 0, fmt.Errorf("get Deployment %s: %w", g.Name, err)
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	switch {
	case d.Spec.Template.Annotations[render.AnnotationDBConnectionHash] != dsnHash:
		return fmt.Sprintf("Deployment %s does not run the new connection yet", d.Name), 0, nil
	case st.ObservedGeneration < d.Generation || st.UpdatedReplicas != want || st.Replicas != want || st.AvailableReplicas != want:
		return fmt.Sprintf("Deployment %s has rolled out %d of %d replicas, %d available, %d in all", d.Name, st.UpdatedReplicas, want, st.AvailableReplicas, st.Replicas), 0, nil
	case st.TerminatingReplicas != nil && *st.TerminatingReplicas > 0:
		return fmt.Sprintf("%d old pods of Deployment %s are terminating", *st.TerminatingReplicas, d.Name), 0, nil
	case st.TerminatingReplicas != nil:
		return "", 0, nil
	}
	grace := time.Duration(corev1.DefaultTerminationGracePeriodSeconds) * time.Second
	if s := d.Spec.Template.Spec.TerminationGracePeriodSeconds; s != nil {
		grace = time.Duration(*s) * time.Second
	}
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "NewReplicaSetAvailable" {
			if left := time.Until(c.LastUpdateTime.Add(grace)); left > 0 {
				return fmt.Sprintf("the old pods of Deployment %s may run for their grace period", d.Name), left, nil
			}
			return "", 0, nil
		}
	}
	return fmt.Sprintf("Deployment %s has not reported its new ReplicaSet available", d.Name), 0, nil
}
