package glance

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/c5c3/glance-operator/api/v1alpha1"
	"github.com/c5c3/glance-operator/pkg/render"
	"github.com/c5c3/glance-operator/pkg/targetcluster"
	"github.com/c5c3/glance-operator/test/fixtures"
)

// TestApplyAfterAlreadyExists: a cache that has not seen a child yet makes
// the create answer AlreadyExists; the child is read from the server and
// brought in line, with no error.
func TestApplyAfterAlreadyExists(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stale client.Object
		apply func(p *pass, g *v1alpha1.Glance) error
		check func(got client.Object) bool
	}{
		{"Service through applyChild", &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "api", Port: 1234}}},
		}, func(p *pass, g *v1alpha1.Glance) error {
			desired := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance"},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "api", Port: 9292}}},
			}
			current := &corev1.Service{}
			return applyChild(context.Background(), p, g, desired, current, func() bool {
				return len(current.Spec.Ports) == 1 && current.Spec.Ports[0].Port == 9292
			}, func() error { current.Spec.Ports = desired.Spec.Ports; return nil })
		}, func(got client.Object) bool { return got.(*corev1.Service).Spec.Ports[0].Port == 9292 }},
		{"Secret through ensureSecret", &corev1.Secret{
			// A database Secret is adopted by nobody: this one is the
			// Glance's already.
			ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "glance-db-connection", OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "Glance", Name: "glance", UID: "glance-uid", Controller: ptr.To(true),
			}}},
			Data: map[string][]byte{ConnectionKey: []byte("old")},
		}, func(p *pass, g *v1alpha1.Glance) error {
			return ensureSecret(context.Background(), p, g, "glance-db-connection", componentDatabase, fixedData(p, map[string][]byte{ConnectionKey: []byte("new")}))
		}, func(got client.Object) bool {
			s := got.(*corev1.Secret)
			return string(s.Data[ConnectionKey]) == "new" && s.Labels[render.LabelComponent] == componentDatabase
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := testScheme(t)
			g := fixtures.NewGlance("openstack", "glance", "2025.2")
			g.UID = "glance-uid"
			server := fake.NewClientBuilder().WithScheme(scheme).WithObjects(g, tc.stale).Build()
			// The cached client has not seen the child.
			kind := cachedForm(tc.stale)
			cached := interceptor.NewClient(server, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if reflect.TypeOf(obj) == reflect.TypeOf(kind) {
					return apierrors.NewNotFound(schema.GroupResource{Resource: "children"}, key.Name)
				}
				return c.Get(ctx, key, obj, opts...)
			}})
			p := &pass{cluster: &targetcluster.Cluster{Client: cached, Reader: server, Scheme: scheme}}
			if err := tc.apply(p, g); err != nil {
				t.Fatalf("apply after AlreadyExists: %v", err)
			}
			got := tc.stale.DeepCopyObject().(client.Object)
			if err := server.Get(context.Background(), client.ObjectKeyFromObject(tc.stale), got); err != nil {
				t.Fatal(err)
			}
			if !tc.check(got) || !metav1.IsControlledBy(got, g) {
				t.Errorf("the existing child was not brought in line: %+v", got)
			}
		})
	}
}

func TestRolloutPending(t *testing.T) {
	// deployment wants three replicas at generation 2.
	deployment := func(st appsv1.DeploymentStatus) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
			Status:     st,
		}
	}
	done := appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}
	with := func(edit func(*appsv1.DeploymentStatus)) appsv1.DeploymentStatus {
		st := done
		edit(&st)
		return st
	}
	available := func(s corev1.ConditionStatus, msg string) appsv1.DeploymentCondition {
		return appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: s, Message: msg}
	}
	for _, tt := range []struct {
		name string
		d    *appsv1.Deployment
		want string
	}{
		{"rolled out", deployment(done), ""},
		{"rolled out, Available", deployment(with(func(s *appsv1.DeploymentStatus) {
			s.Conditions = []appsv1.DeploymentCondition{available(corev1.ConditionTrue, "")}
		})), ""},
		{"generation not observed", deployment(with(func(s *appsv1.DeploymentStatus) { s.ObservedGeneration = 1 })),
			"the Deployment controller has not seen the current spec yet"},
		// An old status says nothing about the new spec, however complete
		// it looks.
		{"generation not observed, replicas short too", deployment(appsv1.DeploymentStatus{ObservedGeneration: 1}),
			"the Deployment controller has not seen the current spec yet"},
		{"observed a newer generation", deployment(with(func(s *appsv1.DeploymentStatus) { s.ObservedGeneration = 3 })), ""},
		{"updated replicas short", deployment(with(func(s *appsv1.DeploymentStatus) { s.UpdatedReplicas = 1 })),
			"1/3 replicas run the current template"},
		{"old replicas left", deployment(with(func(s *appsv1.DeploymentStatus) { s.Replicas = 5 })),
			"2 old replicas are still terminating"},
		{"ready replicas short", deployment(with(func(s *appsv1.DeploymentStatus) { s.ReadyReplicas = 2 })),
			"2/3 replicas ready, 3 available"},
		{"available replicas short", deployment(with(func(s *appsv1.DeploymentStatus) { s.AvailableReplicas = 0 })),
			"3/3 replicas ready, 0 available"},
		{"not Available", deployment(with(func(s *appsv1.DeploymentStatus) {
			s.Conditions = []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue},
				available(corev1.ConditionFalse, "Deployment does not have minimum availability."),
			}
		})), "the Deployment is not Available: Deployment does not have minimum availability."},
		{"Available unknown", deployment(with(func(s *appsv1.DeploymentStatus) {
			s.Conditions = []appsv1.DeploymentCondition{available(corev1.ConditionUnknown, "")}
		})), "the Deployment is not Available: "},
		// Under an HPA the spec may leave replicas unset: nothing is owed.
		{"replicas unset", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Status: appsv1.DeploymentStatus{ObservedGeneration: 1}}, ""},
		{"scaled to zero with a pod left", &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: 1},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](0)},
			Status:     appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1},
		}, "1 old replicas are still terminating"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := rolloutPending(tt.d); got != tt.want {
				t.Errorf("rolloutPending = %q, want %q", got, tt.want)
			}
		})
	}
}

// writeCounter counts the writes a fake client receives.
type writeCounter struct {
	creates, updates, patches, deletes int
	deleted                            []string
}

func (w *writeCounter) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.creates++
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.updates++
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			w.patches++
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.deletes++
			w.deleted = append(w.deleted, obj.GetName())
			return c.Delete(ctx, obj, opts...)
		},
	}
}

func (w *writeCounter) expect(t *testing.T, creates, updates int) {
	t.Helper()
	if w.creates != creates || w.updates != updates || w.patches != 0 || w.deletes != 0 {
		t.Errorf("%d creates, %d updates, %d patches, %d deletes; want %d creates, %d updates and nothing else",
			w.creates, w.updates, w.patches, w.deletes, creates, updates)
	}
}

// applyScene is a Glance with its children on a fake cluster whose writes
// are counted; server is the same store, uncounted.
type applyScene struct {
	g      *v1alpha1.Glance
	p      *pass
	server client.Client
	writes *writeCounter
}

// newApplyScene puts the children on the management cluster when target is
// empty, else on the target cluster of that name.
func newApplyScene(t *testing.T, target string, objs ...client.Object) *applyScene {
	t.Helper()
	scheme := testScheme(t)
	g := fixtures.NewGlance("openstack", "glance", "2025.2")
	g.UID = "glance-uid"
	server := withIndexes(fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...)).Build()
	w := &writeCounter{}
	counted := interceptor.NewClient(server.(client.WithWatch), w.funcs())
	return &applyScene{
		g:      g,
		p:      &pass{cluster: &targetcluster.Cluster{Name: target, Client: counted, Reader: server, Scheme: scheme}},
		server: server,
		writes: w,
	}
}

// desiredService is a rendered Service with a port per entry of ports.
func desiredService(ports ...int32) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{
		Namespace: "openstack", Name: "glance",
		Labels: map[string]string{render.LabelComponent: render.ComponentAPI},
	}}
	for _, port := range ports {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("port-%d", port), Port: port})
	}
	return s
}

// apply runs applySpec on desired the way the Deployment step does for
// its Service, and returns what it left in current.
func (s *applyScene) apply(desired *corev1.Service) (*corev1.Service, error) {
	current := &corev1.Service{}
	err := applySpec(context.Background(), s.p, s.g, desired, &desired.Spec, current, &current.Spec, nil)
	return current, err
}

// applyWrites applies desired, which must succeed with the creates and
// updates given, and returns what the server then holds.
func (s *applyScene) applyWrites(t *testing.T, desired *corev1.Service, creates, updates int) *corev1.Service {
	t.Helper()
	*s.writes = writeCounter{}
	if _, err := s.apply(desired); err != nil {
		t.Fatal(err)
	}
	s.writes.expect(t, creates, updates)
	return s.stored(t)
}

func (s *applyScene) stored(t *testing.T) *corev1.Service {
	t.Helper()
	got := &corev1.Service{}
	if err := s.server.Get(context.Background(), client.ObjectKey{Namespace: "openstack", Name: "glance"}, got); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestApplyChildWritesOnlyWhatChanged: the child is written when the
// rendered state, the operator's labels and annotations or the owner
// reference differ from what is stored, once, and otherwise not at all.
func TestApplyChildWritesOnlyWhatChanged(t *testing.T) {
	withLabel := func(s *corev1.Service, k, v string) *corev1.Service {
		s.Labels[k] = v
		return s
	}
	for _, tt := range []struct {
		name string
		// before is applied first; nil leaves the cluster empty.
		before *corev1.Service
		// meddle is someone else's edit of the stored child after before.
		meddle           func(*corev1.Service)
		after            *corev1.Service
		creates, updates int
		check            func(t *testing.T, got *corev1.Service)
	}{
		{name: "absent: created", after: desiredService(9292), creates: 1, check: func(t *testing.T, got *corev1.Service) {
			if len(got.Spec.Ports) != 1 || got.Spec.Ports[0].Port != 9292 {
				t.Errorf("ports %v, want 9292", got.Spec.Ports)
			}
		}},
		{name: "unchanged: not written", before: desiredService(9292), after: desiredService(9292)},
		{name: "spec changed", before: desiredService(9292), after: desiredService(9393), updates: 1, check: func(t *testing.T, got *corev1.Service) {
			if len(got.Spec.Ports) != 1 || got.Spec.Ports[0].Port != 9393 {
				t.Errorf("ports %v, want 9393", got.Spec.Ports)
			}
		}},
		// A shorter list is a semantic derivative of the longer one; the
		// rendered hash is what notices the removal.
		{name: "port removed", before: desiredService(9292, 9393), after: desiredService(9292), updates: 1, check: func(t *testing.T, got *corev1.Service) {
			if len(got.Spec.Ports) != 1 {
				t.Errorf("ports %v, want 9292 alone", got.Spec.Ports)
			}
		}},
		{name: "label added", before: desiredService(9292), after: withLabel(desiredService(9292), "tier", "api"), updates: 1, check: func(t *testing.T, got *corev1.Service) {
			if got.Labels["tier"] != "api" {
				t.Errorf("labels %v, want tier=api", got.Labels)
			}
		}},
		// Labels are merged, never replaced: one the operator stops
		// setting stays, as it may be someone else's.
		{name: "label no longer rendered", before: withLabel(desiredService(9292), "tier", "api"), after: desiredService(9292), updates: 1, check: func(t *testing.T, got *corev1.Service) {
			if got.Labels["tier"] != "api" {
				t.Errorf("labels %v, want tier=api kept", got.Labels)
			}
		}},
		{name: "someone else's labels and annotations", before: desiredService(9292), meddle: func(s *corev1.Service) {
			s.Labels["team"] = "storage"
			s.Annotations["example.com/note"] = "hands off"
		}, after: desiredService(9292), check: func(t *testing.T, got *corev1.Service) {
			if got.Labels["team"] != "storage" || got.Annotations["example.com/note"] != "hands off" {
				t.Errorf("someone else's metadata lost: %v %v", got.Labels, got.Annotations)
			}
		}},
		{name: "operator's label removed", before: desiredService(9292), meddle: func(s *corev1.Service) {
			delete(s.Labels, render.LabelComponent)
		}, after: desiredService(9292), updates: 1, check: func(t *testing.T, got *corev1.Service) {
			if got.Labels[render.LabelComponent] != render.ComponentAPI {
				t.Errorf("labels %v, want the component label back", got.Labels)
			}
		}},
		{name: "rendered hash removed", before: desiredService(9292), meddle: func(s *corev1.Service) {
			delete(s.Annotations, AnnotationRenderedHash)
		}, after: desiredService(9292), updates: 1, check: func(t *testing.T, got *corev1.Service) {
			if got.Annotations[AnnotationRenderedHash] == "" {
				t.Errorf("annotations %v, want the rendered hash back", got.Annotations)
			}
		}},
		{name: "owner reference removed", before: desiredService(9292), meddle: func(s *corev1.Service) {
			s.OwnerReferences = nil
		}, after: desiredService(9292), updates: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newApplyScene(t, "")
			if tt.before != nil {
				if _, err := s.apply(tt.before); err != nil {
					t.Fatal(err)
				}
			}
			if tt.meddle != nil {
				got := s.stored(t)
				tt.meddle(got)
				if err := s.server.Update(context.Background(), got); err != nil {
					t.Fatal(err)
				}
			}
			*s.writes = writeCounter{}
			current, err := s.apply(tt.after)
			if err != nil {
				t.Fatalf("applyChild: %v", err)
			}
			s.writes.expect(t, tt.creates, tt.updates)
			got := s.stored(t)
			if !metav1.IsControlledBy(got, s.g) {
				t.Errorf("owner references %v, want the Glance as controller", got.OwnerReferences)
			}
			// The caller reads status from what applyChild leaves in current.
			if current.ResourceVersion != got.ResourceVersion {
				t.Errorf("current is at resourceVersion %q, the server at %q", current.ResourceVersion, got.ResourceVersion)
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

// TestApplyChildOwnership: a child the operator did not create is adopted
// unless something else controls it; on a target cluster, ownership is by
// labels.
func TestApplyChildOwnership(t *testing.T) {
	unowned := func() *corev1.Service {
		s := desiredService(9292)
		s.Labels = map[string]string{"team": "storage"}
		return s
	}

	t.Run("unowned: adopted", func(t *testing.T) {
		s := newApplyScene(t, "", unowned())
		got := s.applyWrites(t, desiredService(9292), 0, 1)
		if !metav1.IsControlledBy(got, s.g) || got.Labels["team"] != "storage" || got.Labels[render.LabelComponent] != render.ComponentAPI {
			t.Errorf("adopted Service %v %v, want the Glance as controller and both labels", got.OwnerReferences, got.Labels)
		}
	})

	t.Run("controlled by another: refused, not written", func(t *testing.T) {
		other := unowned()
		other.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "Deployment", Name: "someone-else", UID: "other-uid",
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}
		s := newApplyScene(t, "", other)
		_, err := s.apply(desiredService(9393))
		var owned *controllerutil.AlreadyOwnedError
		if !errors.As(err, &owned) {
			t.Fatalf("applyChild returned %v, want AlreadyOwnedError", err)
		}
		s.writes.expect(t, 0, 0)
		if got := s.stored(t); got.Spec.Ports[0].Port != 9292 || got.OwnerReferences[0].UID != "other-uid" {
			t.Errorf("the other controller's Service was changed: %+v", got)
		}
	})

	t.Run("target cluster: owner labels, no owner reference", func(t *testing.T) {
		s := newApplyScene(t, "region-two", unowned())
		got := s.applyWrites(t, desiredService(9292), 0, 1)
		key, ok := targetcluster.OwnerOf(got.Labels, "Glance")
		if !ok || key != client.ObjectKeyFromObject(s.g) || len(got.OwnerReferences) != 0 {
			t.Errorf("labels %v, owner references %v: want the Glance's owner labels only", got.Labels, got.OwnerReferences)
		}
		// Once labelled it is in sync.
		s.applyWrites(t, desiredService(9292), 0, 0)
	})

	t.Run("unreadable: nothing written", func(t *testing.T) {
		s := newApplyScene(t, "")
		s.p.cluster.Client = interceptor.NewClient(s.p.cluster.Client.(client.WithWatch), interceptor.Funcs{
			Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return apierrors.NewServiceUnavailable("etcd is away")
			},
		})
		if _, err := s.apply(desiredService(9292)); !apierrors.IsServiceUnavailable(err) {
			t.Errorf("applyChild returned %v, want the read's ServiceUnavailable", err)
		}
		s.writes.expect(t, 0, 0)
	})
}

// TestDeploymentAdvertisesPodAddressInServiceFamily: the pods' own address,
// worker_self_reference_url, is bracketed when the API Service, which the
// step applies first, is of the IPv6 family.
func TestDeploymentAdvertisesPodAddressInServiceFamily(t *testing.T) {
	for family, want := range map[corev1.IPFamily]string{
		corev1.IPv4Protocol: "http://$(GLANCE_POD_IP):9292",
		corev1.IPv6Protocol: "http://[$(GLANCE_POD_IP)]:9292",
	} {
		t.Run(string(family), func(t *testing.T) {
			svc := render.Service(fixtures.NewGlance("openstack", "glance", "2025.2"))
			svc.Spec.IPFamilies = []corev1.IPFamily{family}
			s := newApplyScene(t, "", svc)
			s.p.r = &Reconciler{}
			s.p.configMapName, s.p.backends.secretName = "glance-config-0123456789", "glance-backends-0123456789"
			if _, err := reconcileDeployment(context.Background(), s.g, s.p); err != nil {
				t.Fatal(err)
			}
			d := &appsv1.Deployment{}
			if err := s.server.Get(context.Background(), client.ObjectKey{Namespace: "openstack", Name: "glance"}, d); err != nil {
				t.Fatal(err)
			}
			var got string
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				if e.Name == render.EnvWorkerSelfReferenceURL {
					got = e.Value
				}
			}
			if got != want {
				t.Errorf("Service of family %s: worker_self_reference_url %q, want %q", family, got, want)
			}
		})
	}
}
