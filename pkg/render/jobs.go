package render

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/api/v1alpha1"
)

// DatabaseJobKind is what a database Job runs; it is also the suffix of the
// Job's name and its component label.
type DatabaseJobKind string

// Database Jobs.
const (
	// DBSync runs db sync, then db load_metadefs (fresh install, patch bump).
	DBSync DatabaseJobKind = "db-sync"
	// DBExpand, DBMigrate and DBContract are the release-upgrade phases.
	DBExpand   DatabaseJobKind = "db-expand"
	DBMigrate  DatabaseJobKind = "db-migrate"
	DBContract DatabaseJobKind = "db-contract"
)

// ComponentDBPurge is the component label of the purge CronJob, the Jobs it
// spawns and their pods.
const ComponentDBPurge = "db-purge"

// Container names of the database pods.
const (
	ContainerDBSync         = "db-sync"
	ContainerLoadMetadefs   = "db-load-metadefs"
	ContainerDBPurge        = "db-purge"
	databaseJobBackoffLimit = 3
)

// DatabaseJobName is the name of the Job of kind: {name}-{kind}.
func DatabaseJobName(glanceName string, kind DatabaseJobKind) string {
	return glanceName + "-" + string(kind)
}

// DBPurgeCronJobName is the name of the purge CronJob: {name}-db-purge.
func DBPurgeCronJobName(glanceName string) string {
	return glanceName + "-" + ComponentDBPurge
}

// DatabaseJob is the Job {name}-{kind} running glance-manage on image (the
// upgrade phases run the new image); an empty image means ImageRef(g). It
// mounts, env and security context are those of the glance-api container.
// db-sync runs db sync as an init container and db load_metadefs as the main
// container, so the order needs no shell. The Job carries
// AnnotationPodTemplateHash and no TTL: the reconciler re-creates it when the
// hash changes, and reads its outcome for as long as it exists.
func DatabaseJob(g *v1alpha1.Glance, f WorkloadFacts, kind DatabaseJobKind, image string) (*batchv1.Job, error) {
	if image == "" {
		image = ImageRef(g)
	}
	if err := checkGlanceInputs(g, f); err != nil {
		return nil, err
	}
	pod := glanceManagePodSpec(g, f)
	manage := func(name string, args ...string) corev1.Container {
		c := glanceContainer(g, name, image, glanceManageCommand(args...))
		c.Resources = apiResources(g)
		return c
	}
	switch kind {
	case DBSync:
		pod.InitContainers = []corev1.Container{manage(ContainerDBSync, "db", "sync")}
		pod.Containers = []corev1.Container{manage(ContainerLoadMetadefs, "db", "load_metadefs")}
	case DBExpand:
		pod.Containers = []corev1.Container{manage(string(kind), "db", "expand")}
	case DBMigrate:
		pod.Containers = []corev1.Container{manage(string(kind), "db", "migrate")}
	case DBContract:
		pod.Containers = []corev1.Container{manage(string(kind), "db", "contract")}
	default:
		return nil, fmt.Errorf("unknown database job kind %q", kind)
	}
	labels := ChildLabels(g.Name, string(kind))
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)},
		Spec:       pod,
	}
	annotations := map[string]string{AnnotationPodTemplateHash: PodTemplateHash(template)}
	if kind == DBSync {
		annotations[AnnotationSchemaKey] = SchemaKey(g, image)
	}
	if f.DBConnectionHash != "" {
		annotations[AnnotationDBConnectionHash] = f.DBConnectionHash
	}
	if kind != DBSync && f.Upgrade != "" {
		labels = maps.Clone(labels)
		labels[LabelUpgrade] = f.Upgrade
	}
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        DatabaseJobName(g.Name, kind),
			Namespace:   g.Namespace,
			Labels:      labels,
			Annotations: annotations,
		},
		// No activeDeadlineSeconds: a deadline would kill a long migration
		// mid-DDL, which MySQL cannot roll back. A pod that never starts is
		// the reconciler's to end (see stuckSchemaPod).
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](databaseJobBackoffLimit),
			Template:     template,
		},
	}, nil
}

// SchemaKey is what the schema a db-sync brings depends on: the image
// (its migrations and metadefs), the release and the database it syncs.
// Nothing else of the Job's template (env, resources, the config's other
// sections) changes the schema, so an operator upgrade that renders the
// template otherwise runs no db-sync.
func SchemaKey(g *v1alpha1.Glance, image string) string {
	host, err := DatabaseHost(g)
	if err != nil {
		host = err.Error()
	}
	sum := sha256.Sum256([]byte(strings.Join([]string{image, g.Spec.OpenStackRelease, host, strconv.Itoa(int(DatabasePort(g))), g.Spec.Database.Database}, "\x00")))
	return hex.EncodeToString(sum[:8])
}

func glanceManagePodSpec(g *v1alpha1.Glance, f WorkloadFacts) corev1.PodSpec {
	pod := glancePodSpec(g, f)
	pod.RestartPolicy = corev1.RestartPolicyNever
	return pod
}

// resolvedDBPurge is spec.dbPurge with every default applied.
type resolvedDBPurge struct {
	schedule                   string
	suspend                    bool
	ageInDays, maxRows         int32
	activeDeadlineSeconds      int64
	successfulJobsHistoryLimit int32
	failedJobsHistoryLimit     int32
}

// dbPurgeDefaulted is spec.dbPurge with every default applied, unchecked.
func dbPurgeDefaulted(g *v1alpha1.Glance) resolvedDBPurge {
	p := g.Spec.DBPurge
	if p == nil {
		p = &v1alpha1.DBPurgeSpec{}
	}
	return resolvedDBPurge{
		schedule:                   cmp.Or(p.Schedule, v1alpha1.DefaultDBPurgeSchedule),
		suspend:                    ptr.Deref(p.Suspend, v1alpha1.DefaultDBPurgeSuspend),
		ageInDays:                  ptr.Deref(p.AgeInDays, v1alpha1.DefaultDBPurgeAgeInDays),
		maxRows:                    ptr.Deref(p.MaxRows, v1alpha1.DefaultDBPurgeMaxRows),
		activeDeadlineSeconds:      ptr.Deref(p.ActiveDeadlineSeconds, v1alpha1.DefaultDBPurgeActiveDeadlineSecs),
		successfulJobsHistoryLimit: ptr.Deref(p.SuccessfulJobsHistoryLimit, v1alpha1.DefaultDBPurgeSuccessfulJobsLimit),
		failedJobsHistoryLimit:     ptr.Deref(p.FailedJobsHistoryLimit, v1alpha1.DefaultDBPurgeFailedJobsLimit),
	}
}

func resolveDBPurge(g *v1alpha1.Glance) (resolvedDBPurge, error) {
	r := dbPurgeDefaulted(g)
	// The API server parses schedules with the same library; checking here
	// turns a rejected apply into a message naming the field.
	if _, err := cron.ParseStandard(r.schedule); err != nil {
		return r, fmt.Errorf("spec.dbPurge.schedule %q: %w", r.schedule, err)
	}
	for _, v := range []struct {
		field string
		value int64
	}{
		{"ageInDays", int64(r.ageInDays)}, {"maxRows", int64(r.maxRows)},
		{"activeDeadlineSeconds", r.activeDeadlineSeconds},
		{"successfulJobsHistoryLimit", int64(r.successfulJobsHistoryLimit)},
		{"failedJobsHistoryLimit", int64(r.failedJobsHistoryLimit)},
	} {
		if v.value < 1 {
			return r, fmt.Errorf("spec.dbPurge.%s must be at least 1, is %d", v.field, v.value)
		}
	}
	return r, nil
}

// DBPurgeSchedule is spec.dbPurge's schedule, defaulted and unparsed, and
// whether the purge is suspended: the state metrics read it at every scrape
// and parse each distinct schedule once.
func DBPurgeSchedule(g *v1alpha1.Glance) (schedule string, suspended bool) {
	r := dbPurgeDefaulted(g)
	return r.schedule, r.suspend
}

// DBPurgeCronJob is the CronJob {name}-db-purge running glance-manage db
// purge on f.PurgeImage, else spec.image, with the resolved spec.dbPurge. The Jobs it spawns,
// and their pods, carry CommonLabels (component db-purge), by which the
// reconciler lists them; activeDeadlineSeconds makes a wedged run fail.
func DBPurgeCronJob(g *v1alpha1.Glance, f WorkloadFacts) (*batchv1.CronJob, error) {
	if err := checkGlanceInputs(g, f); err != nil {
		return nil, err
	}
	r, err := resolveDBPurge(g)
	if err != nil {
		return nil, err
	}
	purge := glanceContainer(g, ContainerDBPurge, cmp.Or(f.PurgeImage, ImageRef(g)), glanceManageCommand("db", "purge",
		"--age_in_days", fmt.Sprint(r.ageInDays), "--max_rows", fmt.Sprint(r.maxRows)))
	purge.Resources = apiResources(g)
	pod := glanceManagePodSpec(g, f)
	pod.Containers = []corev1.Container{purge}

	labels := ChildLabels(g.Name, ComponentDBPurge)
	return &batchv1.CronJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: metav1.ObjectMeta{Name: DBPurgeCronJobName(g.Name), Namespace: g.Namespace, Labels: labels},
		Spec: batchv1.CronJobSpec{
			Schedule:                   r.schedule,
			Suspend:                    ptr.To(r.suspend),
			ConcurrencyPolicy:          batchv1.ForbidConcurrent,
			SuccessfulJobsHistoryLimit: ptr.To(r.successfulJobsHistoryLimit),
			FailedJobsHistoryLimit:     ptr.To(r.failedJobsHistoryLimit),
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)},
				Spec: batchv1.JobSpec{
					ActiveDeadlineSeconds: ptr.To(r.activeDeadlineSeconds),
					BackoffLimit:          ptr.To[int32](databaseJobBackoffLimit),
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)},
						Spec:       pod,
					},
				},
			},
		},
	}, nil
}
