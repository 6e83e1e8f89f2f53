package glance

import (
	"cmp"
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

// slotObjects is what exists of a database user slot. The slot's Secret
// is its metadata: its values are read from the API server, and only
// where the operator must know one.
type slotObjects struct {
	secret      *metav1.PartialObjectMetadata
	user, grant *unstructured.Unstructured
}

func (o slotObjects) exists() bool { return o.secret != nil || o.user != nil || o.grant != nil }

// username is the slot's SQL user, for a message: its User's, or the
// credentials' user of the slot when it has none.
func (o slotObjects) username(p *pass, s database.Slot) string {
	if o.user != nil {
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
// dropped once no pod or Job connects as it. It leaves the DSN's slot in
// p.dbSlot, its user in p.dbUser and its keyed digest in p.dsnHash; the
// DSN itself is made only for a write of the connection Secret
// (connectionDSN). Brownfield databases and Dynamic credentials have one
// user, the credentials Secret's, and leave them empty. The
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
	states := map[database.Slot]database.SlotState{}
	for _, s := range []database.Slot{database.SlotA, database.SlotB} {
		o, err := readSlot(ctx, g, p, s)
		if err != nil {
			return err
		}
		slots[s] = o
		if states[s], err = slotState(ctx, g, p, s, o); err != nil {
			return err
		}
	}
	liveSlot, liveHash, err := liveConnection(ctx, g, p)
	if err != nil {
		return err
	}
	obs := database.UsersObservation{Active: liveSlot, A: states[database.SlotA], B: states[database.SlotB]}
	var unsettled string
	if other := obs.Active.Other(); obs.Active != "" && slots[other].exists() {
		// Only the other slot's drop waits for the pods to settle: most
		// passes have no other slot, and read no Deployment or Job here.
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
	if plan.Provision != "" {
		if err := provisionSlot(ctx, g, p, plan.Provision, slots[plan.Provision], states[plan.Provision].Current, plan.Provision != plan.Active); err != nil {
			return err
		}
	}
	// The DSN is the active slot's user as its Secret holds it: one of an
	// older password, or an older user name, until the pods roll onto the
	// other slot. Where it holds the credentials' (the steady state), the
	// DSN's digest was derived with them and nothing is read.
	active := plan.Active
	p.dbSlot, p.dbSlotCurrent = active, plan.Provision == active || states[active].Current
	if p.dbSlotCurrent {
		p.dbUser, p.dsnHash = active.Username(p.credentials.username), p.credentials.slotDSNHash(active)
	} else if err := olderDSN(ctx, g, p, active, slots[active]); err != nil {
		return err
	}
	if plan.Active != obs.Active && obs.Active != "" {
		announce(ctx, p, g, nil, corev1.EventTypeNormal, v1alpha1.EventDatabaseUserSwitched, "Rotate",
			"The pods roll onto database user %s (slot %s), Ready with the new password; user %s is dropped once no pod connects as it",
			p.dbUser, plan.Active, slots[obs.Active].username(p, obs.Active))
	}
	return nil
}

// liveConnection is what the {name}-db-connection Secret holds, as
// digests: the slot it names (empty for none, or no Secret) and the keyed
// digest of its DSN.
func liveConnection(ctx context.Context, g *v1alpha1.Glance, p *pass) (database.Slot, string, error) {
	name := render.DBConnectionSecretName(g.Name)
	m := secretMetadata()
	switch err := p.cluster.Client.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: name}, m); {
	case apierrors.IsNotFound(err):
		return "", "", nil
	case err != nil:
		return "", "", fmt.Errorf("get Secret %s: %w", name, err)
	case !ownedBy(m, g):
		// Another's, which is not read: writing it is refused.
		return "", "", nil
	}
	held, err := childDigests(ctx, p, m)
	if err != nil {
		return "", "", err
	}
	var slot database.Slot
	for _, s := range []database.Slot{database.SlotA, database.SlotB} {
		if held[SlotKey] == keyedDigest(p.digestKey, string(s)) {
			slot = s
		}
	}
	return slot, held[ConnectionKey], nil
}

// olderDSN sets p.dbUser and p.dsnHash for an active slot that does not
// hold the credentials' password for its user: from its Secret, read from
// the API server (which also leaves the DSN in p.dsn), or known from an
// earlier read of the same version of it. A slot without a Secret (a
// Glance's User from before the slots) connects as its User's user with
// the credentials' password.
func olderDSN(ctx context.Context, g *v1alpha1.Glance, p *pass, s database.Slot, o slotObjects) error {
	if o.secret == nil {
		password, err := readDBPassword(ctx, g, p)
		if err != nil {
			return err
		}
		return p.setDSN(g, o.username(p, s), password)
	}
	// Known under this spec's DSN and this digest key only.
	what := "dsn/" + keyFingerprint(p.digestKey) + "/" + dsnShape(g)
	if v, ok := p.cluster.Known(o.secret, what); ok {
		known := v.(slotDSN)
		p.dbUser, p.dsnHash = known.user, known.hash
		return nil
	}
	var secret corev1.Secret
	if err := p.cluster.Reader.Get(ctx, client.ObjectKeyFromObject(o.secret), &secret); err != nil {
		return fmt.Errorf("get Secret %s: %w", o.secret.Name, err)
	}
	user := string(secret.Data[render.DatabaseUserUsernameKey])
	if user == "" {
		user = o.username(p, s)
	}
	if err := p.setDSN(g, user, string(secret.Data[render.DatabaseUserPasswordKey])); err != nil {
		return err
	}
	p.cluster.Remember(&secret, what, slotDSN{user: p.dbUser, hash: p.dsnHash})
	return nil
}

// slotDSN is what olderDSN keeps of a slot's Secret: the user, and the
// keyed digest of the DSN it makes; never the password.
type slotDSN struct{ user, hash string }

// setDSN makes the DSN of user and password the pass's.
func (p *pass) setDSN(g *v1alpha1.Glance, user, password string) error {
	dsn, err := render.DSN(g, user, password)
	if err != nil {
		// The Secrets step read the same spec into a DSN; only the user
		// differs, which the DSN escapes.
		return fmt.Errorf("the database connection of user slot %s: %w", p.dbSlot, err)
	}
	p.dbUser, p.dsn, p.dsnHash = user, dsn, keyedDigest(p.digestKey, dsn)
	return nil
}

// connectionDSN is the DSN of the connection Secret, for a write of it:
// known to a pass that read what it is made of, read again otherwise (the
// credentials, or the active slot's Secret), and checked against the
// digest the pass decided on.
func connectionDSN(ctx context.Context, g *v1alpha1.Glance, p *pass) (string, error) {
	if p.dsn == "" {
		hash := p.dsnHash
		switch {
		case p.dbSlot == "" || p.dbSlotCurrent:
			password, err := readDBPassword(ctx, g, p)
			if err != nil {
				return "", err
			}
			user := cmp.Or(p.dbUser, p.credentials.username)
			if p.dsn, err = render.DSN(g, user, password); err != nil {
				return "", err
			}
		default:
			m := secretMetadata()
			// No uid: nothing known of it stands in for the read.
			m.Namespace, m.Name = g.Namespace, render.DatabaseUserSecretName(g.Name, p.dbSlot)
			if err := olderDSN(ctx, g, p, p.dbSlot, slotObjects{secret: m}); err != nil {
				return "", err
			}
			if p.dsnHash != hash {
				return "", errCredentialsChanged
			}
		}
	}
	if keyedDigest(p.digestKey, p.dsn) != p.dsnHash {
		return "", errCredentialsChanged
	}
	return p.dsn, nil
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
	secret := secretMetadata()
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
func slotState(ctx context.Context, g *v1alpha1.Glance, p *pass, s database.Slot, o slotObjects) (database.SlotState, error) {
	st := database.SlotState{Exists: o.exists()}
	user := s.Username(p.credentials.username)
	switch {
	case o.secret != nil:
		held, err := childDigests(ctx, p, o.secret)
		if err != nil {
			return st, err
		}
		st.Current = held[render.DatabaseUserUsernameKey] == keyedDigest(p.digestKey, user) &&
			held[render.DatabaseUserPasswordKey] == p.credentials.dbPasswordHash
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
	return st, nil
}

// provisionSlot makes the slot's Secret hold the credentials Secret's user
// and password, unless it holds them (current), and, for a slot the DSN
// does not name yet, applies its User and Grant (the Database step applies
// the active slot's).
func provisionSlot(ctx context.Context, g *v1alpha1.Glance, p *pass, s database.Slot, o slotObjects, current, standby bool) error {
	if o.secret == nil || !current {
		if standby && o.secret == nil {
			announce(ctx, p, g, nil, corev1.EventTypeNormal, v1alpha1.EventDatabaseUserCreating, "Rotate",
				"The database password changed: making database user %s (slot %s) with it, for the pods to roll onto once it is Ready",
				s.Username(p.credentials.username), s)
		}
		user := s.Username(p.credentials.username)
		if err := ensureSecret(ctx, p, g, render.DatabaseUserSecretName(g.Name, s), componentDatabase, secretData{
			digests: map[string]string{
				render.DatabaseUserUsernameKey: keyedDigest(p.digestKey, user),
				render.DatabaseUserPasswordKey: p.credentials.dbPasswordHash,
			},
			values: func(ctx context.Context) (map[string][]byte, error) {
				password, err := readDBPassword(ctx, g, p)
				if err != nil {
					return nil, err
				}
				return map[string][]byte{render.DatabaseUserUsernameKey: []byte(user), render.DatabaseUserPasswordKey: []byte(password)}, nil
			},
		}); err != nil {
			return err
		}
	}
	if !standby {
		return nil
	}
	for _, obj := range render.DatabaseUserObjects(g, s, s.Username(p.credentials.username)) {
		if _, err := applyDatabaseObject(ctx, p, g, obj); err != nil {
			return err
		}
	}
	return nil
}

// readDBPassword returns the credentials Secret's database password,
// reading the credentials when this pass took them from the cache of what
// was derived from them, which keeps no password. It fails when they no
// longer are what the pass derived.
func readDBPassword(ctx context.Context, g *v1alpha1.Glance, p *pass) (string, error) {
	if p.dbPassword != "" {
		return p.dbPassword, nil
	}
	p.cluster.Forget(credentialsDerivation(g))
	c, password, err := readCredentials(ctx, g, p)
	if err != nil {
		return "", err
	}
	if password == "" || c.username != p.credentials.username || c.dbPasswordHash != p.credentials.dbPasswordHash {
		return "", errCredentialsChanged
	}
	p.dbPassword = password
	return password, nil
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
