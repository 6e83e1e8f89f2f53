package glance

import (
	"bytes"
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/admission"
	"github.com/c5c3/glance-operator/pkg/pipeline"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
)

// BackendsConfKey is the key of backends.conf in the backends Secret.
const BackendsConfKey = "backends.conf"

// S3CredentialsMissing names, quoted and comma-separated, the keys an S3
// credentials Secret lacks; empty when it holds both. Both controllers
// judge the Secret by it.
func S3CredentialsMissing(s *corev1.Secret) string {
	var missing []string
	for _, k := range []string{v1alpha1.S3AccessKeyIDKey, v1alpha1.S3SecretAccessKeyKey} {
		if len(s.Data[k]) == 0 {
			missing = append(missing, strconv.Quote(k))
		}
	}
	return strings.Join(missing, ", ")
}

// S3CABundle is the CA bundle of the key of s that ref
// (s3.caBundleSecretRef) names, or what is wrong with it when the key is
// not PEM certificates and nothing else. Both controllers judge the Secret
// by it; problem never quotes the value.
func S3CABundle(s *corev1.Secret, ref *v1alpha1.SecretKeySelector) (bundle, problem string) {
	key := cmp.Or(ref.Key, v1alpha1.DefaultCABundleKey)
	rest := s.Data[key]
	if len(bytes.TrimSpace(rest)) == 0 {
		return "", fmt.Sprintf("lacks key %q", key)
	}
	for len(bytes.TrimSpace(rest)) > 0 {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return "", fmt.Sprintf("key %q holds something other than PEM certificates", key)
		}
		if block.Type != "CERTIFICATE" {
			return "", fmt.Sprintf("key %q holds a PEM %s block, not only certificates", key, block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return "", fmt.Sprintf("key %q holds a certificate that does not parse: %v", key, err)
		}
	}
	return string(s.Data[key]), ""
}

// backendsProjection is what the Backends step hands to the steps after it.
type backendsProjection struct {
	// valid is true when exactly one rendered backend is the default; only
	// then does Config re-render.
	valid bool
	// secretName is the backends Secret to mount: the new one when valid,
	// the live one otherwise (empty before any valid projection).
	secretName string
	// defaultBackend is the default store of a valid projection.
	defaultBackend string
	// stores counts the stores of a valid projection.
	stores int
	// live are the names the Deployment runs with.
	live liveNames
	// endpoints are the S3 hosts of the mounted and the rendered backends,
	// for the NetworkPolicy's egress.
	endpoints []string
}

// reconcileBackends renders the attached, credential-ready backends into a
// content-hashed backends Secret. Waiting and invalid states never end the
// pass: first install proceeds, and a backend's status flip re-enqueues the
// Glance through the watch.
func reconcileBackends(ctx context.Context, g *v1alpha1.Glance, p *pass) (ctrl.Result, error) {
	live, err := readLiveNames(ctx, p, g)
	if err != nil {
		return ctrl.Result{}, err
	}
	p.backends = backendsProjection{live: live, secretName: live.backendsSecret}

	var list v1alpha1.GlanceBackendList
	if err := p.r.Client.List(ctx, &list, client.InNamespace(g.Namespace), client.MatchingFields{v1alpha1.IndexBackendGlance: g.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list backends: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })

	// A skip is announced when it starts, not on every pass that repeats
	// it: the previous BackendsReady message lists who was skipped.
	wasSkipped := []string(nil)
	if c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionBackendsReady); c != nil {
		wasSkipped = skippedIn(c.Message)
	}
	var waiting []string
	var judged []*v1alpha1.GlanceBackend
	why := map[string]string{}
	for i := range list.Items {
		b := &list.Items[i]
		if !b.DeletionTimestamp.IsZero() {
			continue
		}
		// CredentialsReady, never the aggregate Ready: Ready also needs
		// ConfigProjected, which only this step can bring about. A backend
		// not judged yet is awaited; one judged not ready is skipped, with
		// the reason, so the Glance's events say why it is missing.
		cred := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionCredentialsReady)
		switch {
		case cred == nil || cred.Status == metav1.ConditionUnknown:
			waiting = append(waiting, b.Name)
		case cred.Status == metav1.ConditionFalse:
			why[b.Name] = "its credentials are not ready: " + cred.Message
			judged = append(judged, b)
		default:
			why[b.Name] = renderableSpec(b)
			judged = append(judged, b)
		}
	}
	var candidates []*v1alpha1.GlanceBackend
	for _, b := range judged {
		if why[b.Name] == "" {
			candidates = append(candidates, b)
		}
	}

	// The credentials are read only when a candidate or its Secret changed
	// since the last derivation, or the backends Secret it named is gone.
	var d backendsDerivation
	var data map[string]string
	var rendered []*v1alpha1.GlanceBackend
	var defaults []string
	for attempt := 0; ; attempt++ {
		if d, data, err = deriveBackends(ctx, g, p, candidates); err != nil {
			return ctrl.Result{}, err
		}
		rendered, defaults = nil, nil
		for i, b := range candidates {
			if d.why[i] == "" {
				rendered = append(rendered, b)
				if b.Spec.IsDefault {
					defaults = append(defaults, b.Name)
				}
			}
		}
		if data != nil || len(defaults) != 1 || attempt > 0 {
			break
		}
		err := p.cluster.Client.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: d.secretName}, secretMetadata())
		if err == nil {
			break
		}
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get Secret %s: %w", d.secretName, err)
		}
		p.cluster.Forget(backendsDerivationID(g))
	}
	for i, b := range candidates {
		why[b.Name] = d.why[i]
	}
	var skipped []string
	for _, b := range judged {
		if why[b.Name] == "" {
			continue
		}
		skipped = append(skipped, b.Name)
		if !slices.Contains(wasSkipped, b.Name) {
			announce(ctx, p, g, b, corev1.EventTypeWarning, v1alpha1.EventGlanceBackendSkipped, "Project", "backend %q skipped: %s", b.Name, why[b.Name])
		}
	}
	attached := len(waiting) + len(judged)

	// The NetworkPolicy must let the running pods reach every store they can
	// use: the ones the live backends Secret configures, which stay mounted
	// while this pass's projection is invalid, and this pass's.
	if live.backendsSecret != "" {
		mounted, _, err := ReadBackendsSecret(ctx, p.cluster, client.ObjectKey{Namespace: g.Namespace, Name: live.backendsSecret})
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("the mounted backends Secret: %w", err)
		}
		p.backends.endpoints = append(p.backends.endpoints, mounted.Hosts...)
	}
	for _, b := range rendered {
		if !slices.Contains(p.backends.endpoints, b.Spec.S3.Host) {
			p.backends.endpoints = append(p.backends.endpoints, b.Spec.S3.Host)
		}
	}
	notes := backendNotes(waiting, skipped)
	// Waiting means nothing is attached yet. Backends attached but none of
	// them rendered is the spec's invalid projection: zero credential-ready
	// defaults.
	switch {
	case attached == 0:
		pipeline.SetCondition(g, v1alpha1.ConditionBackendsReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForBackends, "no GlanceBackend is attached")
		return ctrl.Result{}, nil
	case len(defaults) != 1:
		msg := "none of the rendered backends is the default"
		switch {
		case len(rendered) == 0:
			msg = "no attached GlanceBackend has ready credentials"
		case len(defaults) > 1:
			msg = fmt.Sprintf("the rendered backends %s are all marked default", strings.Join(defaults, ", "))
		}
		pipeline.SetCondition(g, v1alpha1.ConditionBackendsReady, metav1.ConditionFalse, v1alpha1.ReasonNoDefaultBackend,
			msg+"; keeping the last good configuration"+notes)
		return ctrl.Result{}, nil
	}

	name := d.secretName
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.Namespace, Labels: childLabels(g, componentBackends)},
		Immutable:  ptr.To(true),
		StringData: data,
		Type:       corev1.SecretTypeOpaque,
	}
	if data == nil {
		// A kept derivation: the Secret is there, holding what it names.
		err = pruneHistory(ctx, p, g, secretMetadataList(), componentBackends, append([]string{name}, live.backendsSecrets...))
	} else {
		err = ensureImmutable(ctx, p, g, secret, secretMetadataList(), componentBackends, live.backendsSecrets)
		// What the Secret holds, but its credentials, is known from its
		// creation (a Secret made before has no uid here: not kept).
		p.cluster.Remember(secret, knownBackends, backendsContent(data[BackendsConfKey]))
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	p.backends.valid, p.backends.secretName, p.backends.defaultBackend = true, name, defaults[0]
	p.backends.stores = len(rendered)
	names := make([]string, len(rendered))
	for i, b := range rendered {
		names[i] = b.Name
	}
	pipeline.SetCondition(g, v1alpha1.ConditionBackendsReady, metav1.ConditionTrue, v1alpha1.ReasonAllBackendsProjected,
		fmt.Sprintf("projected %s (default %s) into Secret %s%s", strings.Join(names, ", "), defaults[0], name, notes))
	return ctrl.Result{}, nil
}

// BackendsSecretContent is what the operator reads of a backends Secret:
// its store sections and S3 hosts, never its credentials.
type BackendsSecretContent struct {
	Sections, Hosts []string
}

// knownBackends names BackendsSecretContent in
// targetcluster.Cluster.Known.
const knownBackends = "backends"

// ReadBackendsSecret returns what the backends Secret key holds; found is
// false when it does not exist. The caches hold its metadata only: its
// data is read from the API server once per version of it (the Secret is
// immutable, so once), and only the sections and hosts are kept.
func ReadBackendsSecret(ctx context.Context, c *targetcluster.Cluster, key client.ObjectKey) (content BackendsSecretContent, found bool, _ error) {
	m := secretMetadata()
	switch err := c.Client.Get(ctx, key, m); {
	case apierrors.IsNotFound(err):
		return BackendsSecretContent{}, false, nil
	case err != nil:
		return BackendsSecretContent{}, false, fmt.Errorf("get Secret %s: %w", key.Name, err)
	}
	if v, ok := c.Known(m, knownBackends); ok {
		return v.(BackendsSecretContent), true, nil
	}
	var s corev1.Secret
	switch err := c.Reader.Get(ctx, key, &s); {
	case apierrors.IsNotFound(err):
		return BackendsSecretContent{}, false, nil
	case err != nil:
		return BackendsSecretContent{}, false, fmt.Errorf("get Secret %s: %w", key.Name, err)
	}
	content = backendsContent(string(s.Data[BackendsConfKey]))
	c.Remember(&s, knownBackends, content)
	return content, true, nil
}

// backendsContent is what backends.conf holds but its credentials. Each
// string is a copy: a substring would keep the whole file, credentials
// included, in memory for as long as the content is kept.
func backendsContent(conf string) BackendsSecretContent {
	var content BackendsSecretContent
	for _, line := range strings.Split(conf, "\n") {
		line = strings.TrimSpace(line)
		if len(line) > 2 && line[0] == '[' && line[len(line)-1] == ']' {
			content.Sections = append(content.Sections, strings.Clone(line[1:len(line)-1]))
		}
	}
	for _, host := range render.BackendHosts(conf) {
		content.Hosts = append(content.Hosts, strings.Clone(host))
	}
	return content
}

// renderableSpec says why a backend's spec cannot be rendered, before its
// credentials are read; empty when it can.
func renderableSpec(b *v1alpha1.GlanceBackend) string {
	if b.Spec.S3 == nil {
		return "it has no s3 block"
	}
	if errs := admission.ValidateGlanceBackendSpec(b); len(errs) > 0 {
		return "it breaks admission rules: " + errs.ToAggregate().Error()
	}
	return ""
}

// backendsDerivation is what the Backends step derives from the candidates'
// credentials, kept between passes (targetcluster.Derive): no credential,
// only which candidates render and the name of the Secret they make.
type backendsDerivation struct {
	// why is, for each candidate in turn, why its credentials skip it;
	// empty for one rendered. It never quotes a credential.
	why []string
	// secretName is the backends Secret of the rendered candidates; empty
	// when none renders.
	secretName string
}

// backendsDerivationID names the derivation of a Glance's backends.
func backendsDerivationID(g *v1alpha1.Glance) string {
	return "glance/" + g.Namespace + "/" + g.Name + "/backends"
}

// deriveBackends reads the candidates' credentials, unless the derivation
// kept from an earlier pass still holds, and renders backends.conf. data
// is the backends Secret's content when this pass read them, nil when the
// derivation was kept.
func deriveBackends(ctx context.Context, g *v1alpha1.Glance, p *pass, candidates []*v1alpha1.GlanceBackend) (backendsDerivation, map[string]string, error) {
	// The credentials Secret of each candidate in turn, then the CA
	// bundle Secrets: caRead[i] is the index of candidate i's, or -1.
	keys := make([]client.ObjectKey, len(candidates))
	caRead := make([]int, len(candidates))
	var inputs strings.Builder
	for i, b := range candidates {
		keys[i] = client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.S3.CredentialsSecretRef.Name}
		caRead[i] = -1
		spec, err := json.Marshal(b.Spec)
		if err != nil {
			return backendsDerivation{}, nil, err
		}
		fmt.Fprintf(&inputs, "%s\x00%s\x00", b.Name, spec)
	}
	for i, b := range candidates {
		if ca := b.Spec.S3.CABundleSecretRef; ca != nil {
			caRead[i] = len(keys)
			keys = append(keys, client.ObjectKey{Namespace: b.Namespace, Name: ca.Name})
		}
	}
	var data map[string]string
	d, fresh, err := targetcluster.Derive(ctx, p.cluster, backendsDerivationID(g), inputs.String(), keys, func(reads []targetcluster.SecretRead) (backendsDerivation, error) {
		d := backendsDerivation{why: make([]string, len(candidates))}
		var rendered []render.Backend
		for i, b := range candidates {
			var ca *targetcluster.SecretRead
			if caRead[i] >= 0 {
				ca = &reads[caRead[i]]
			}
			rb, why := withCredentials(b, reads[i], ca)
			if d.why[i] = why; why == "" {
				rendered = append(rendered, rb)
			}
		}
		if len(rendered) == 0 {
			return d, nil
		}
		var err error
		if data, err = render.BackendsSecretData(rendered); err != nil {
			return backendsDerivation{}, fmt.Errorf("render backends.conf: %w", err)
		}
		d.secretName = render.BackendsSecretName(g.Name, data)
		return d, nil
	})
	if !fresh {
		data = nil
	}
	return d, data, err
}

// withCredentials is the backend rendered with the credentials and the CA
// bundle (ca, nil without s3.caBundleSecretRef) read, or why it cannot be:
// a missing or unreadable Secret (refused, timed out) skips this backend
// alone, and its siblings keep projecting. why never quotes a credential.
func withCredentials(b *v1alpha1.GlanceBackend, read targetcluster.SecretRead, ca *targetcluster.SecretRead) (render.Backend, string) {
	name := read.Key.Name
	if apierrors.IsNotFound(read.Err) {
		return render.Backend{}, fmt.Sprintf("its credentials Secret %q does not exist", name)
	}
	if read.Err != nil {
		return render.Backend{}, fmt.Sprintf("its credentials Secret %q cannot be read: %v", name, read.Err)
	}
	if missing := S3CredentialsMissing(read.Secret); missing != "" {
		return render.Backend{}, fmt.Sprintf("its credentials Secret %q lacks key %s", name, missing)
	}
	rb := render.Backend{Name: b.Name, Spec: b.Spec, AccessKeyID: string(read.Secret.Data[v1alpha1.S3AccessKeyIDKey]), SecretAccessKey: string(read.Secret.Data[v1alpha1.S3SecretAccessKeyKey])}
	if ca != nil {
		name := ca.Key.Name
		switch {
		case apierrors.IsNotFound(ca.Err):
			return render.Backend{}, fmt.Sprintf("its CA bundle Secret %q does not exist", name)
		case ca.Err != nil:
			return render.Backend{}, fmt.Sprintf("its CA bundle Secret %q cannot be read: %v", name, ca.Err)
		}
		var problem string
		if rb.CABundle, problem = S3CABundle(ca.Secret, b.Spec.S3.CABundleSecretRef); problem != "" {
			return render.Backend{}, fmt.Sprintf("its CA bundle Secret %q %s", name, problem)
		}
	}
	if err := render.CheckBackend(rb); err != nil {
		return render.Backend{}, err.Error()
	}
	return rb, ""
}

// The note of backendNotes that lists the skipped backends, which
// skippedIn reads back.
const (
	skippedNote    = "skipped "
	skippedNoteEnd = " (see events)"
)

// skippedIn are the backends a BackendsReady message of backendNotes lists
// as skipped. Object names hold no ", ", so the list reads back whole.
func skippedIn(message string) []string {
	for _, note := range strings.Split(message, "; ") {
		if list, ok := strings.CutPrefix(note, skippedNote); ok {
			if list, ok = strings.CutSuffix(list, skippedNoteEnd); ok {
				return strings.Split(list, ", ")
			}
		}
	}
	return nil
}

func backendNotes(waiting, skipped []string) string {
	var notes []string
	if len(waiting) > 0 {
		notes = append(notes, "waiting for the credentials of "+strings.Join(waiting, ", "))
	}
	if len(skipped) > 0 {
		notes = append(notes, skippedNote+strings.Join(skipped, ", ")+skippedNoteEnd)
	}
	if len(notes) == 0 {
		return ""
	}
	return "; " + strings.Join(notes, "; ")
}
