package realnode

import (
	"context"
	"crypto/sha256"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/c5c3/glance-operator/test/controlplane"
)

// The scene's S3 server: SeaweedFS (its weed command, built by `make
// control-plane` from the tools module hack/tools/seaweedfs), master,
// volume server, filer and S3 gateway in one process, as a pod behind the
// Service s3. It serves S3 over HTTP on S3Port and over HTTPS, with a
// certificate of the scene's own CA, on S3TLSPort.
const (
	S3ServiceName = "s3"
	S3Port        = 9000
	S3TLSPort     = 9443
	// S3AccessKeyID and S3SecretAccessKey are Glance's S3 credentials: the
	// server's glance identity, and what the Secret S3CredentialsSecret
	// holds. The secret holds what a URL must escape ('/' and '+').
	S3AccessKeyID     = "glance"
	S3SecretAccessKey = "glance/secret+key"
	// s3AdminAccessKeyID and s3AdminSecretAccessKey are the scene's own
	// identity: it creates the buckets and reads the objects.
	s3AdminAccessKeyID     = "scene-admin"
	s3AdminSecretAccessKey = "scene-admin-secret"
	// S3CASecretName is the Secret holding the CA that signs the server's
	// certificate, under the key ca.crt.
	S3CASecretName = "s3-ca"
	// s3Region is the region the scene's clients sign for; SeaweedFS takes
	// any.
	s3Region = "us-east-1"
)

// The server's files in its pod.
const (
	s3ConfigDir = "/etc/seaweedfs"
	s3TLSDir    = "/etc/seaweedfs-tls"
	s3DataDir   = "/data"
)

// S3Server is the scene's S3 server, with a client of its admin identity
// by pod IP.
type S3Server struct {
	namespace, pod string
	cs             kubernetes.Interface
	client         *s3.Client
	// CA is the scene's CA certificate in PEM, which signs the HTTPS
	// port's certificate.
	CA []byte
	// Startup is how long the server took from its pod's creation to the
	// first write it took, for reports.
	Startup time.Duration
}

// S3Object is an object as the S3 server reports it.
type S3Object struct {
	Size   int64
	ETag   string
	SHA256 string
}

// Parts is the number of parts of a multipart upload that wrote the object,
// from its ETag (S3's "<md5 of the parts' md5s>-<parts>"), or 0 when a
// single PUT wrote it.
func (o S3Object) Parts() int {
	_, n, ok := strings.Cut(strings.Trim(o.ETag, `"`), "-")
	if !ok {
		return 0
	}
	parts, err := strconv.Atoi(n)
	if err != nil {
		return 0
	}
	return parts
}

// startS3Server runs the scene's S3 server in ns from image and creates
// bucket in it: its identities (the scene's and Glance's) in a Secret, a
// serving certificate of a new CA for the Service's names in another, the
// CA in S3CASecretName.
func (e *Env) startS3Server(ctx context.Context, ns, image, bucket string) (*S3Server, error) {
	ca, err := controlplane.NewCA("s3." + ns)
	if err != nil {
		return nil, err
	}
	svc := S3ServiceName + "." + ns
	serving, err := ca.Issue(pkix.Name{CommonName: svc + ".svc"}, S3ServiceName, svc, svc+".svc", svc+".svc.cluster.local")
	if err != nil {
		return nil, err
	}
	config, err := s3Identities()
	if err != nil {
		return nil, err
	}
	for _, secret := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "s3-server-config"}, Data: map[string][]byte{"s3.json": config}},
		{ObjectMeta: metav1.ObjectMeta{Name: "s3-server-tls"}, Data: map[string][]byte{"tls.crt": serving.Cert, "tls.key": serving.Key}},
		{ObjectMeta: metav1.ObjectMeta{Name: S3CASecretName}, Data: map[string][]byte{"ca.crt": ca.CertPEM}},
	} {
		if _, err := e.CS.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	created := time.Now()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: S3ServiceName},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:  "seaweedfs",
				Image: image,
				// Master, volume server and filer listen on loopback; only
				// the S3 gateway is reached from outside the pod, and its
				// Iceberg and Lance catalogs are off. The log
				// names every GET of an object (GetObjectHandler at level
				// 3), which ObjectReads counts.
				Args: []string{
					"-logtostderr", "-vmodule=s3api_object_handlers=3",
					"server", "-dir=" + s3DataDir, "-ip=127.0.0.1",
					"-master.volumeSizeLimitMB=256", "-volume.max=16", "-master.telemetry=false",
					"-filer", "-s3", "-s3.ip.bind=0.0.0.0", "-s3.port.iceberg=0", "-s3.port.lance=0",
					"-s3.port=" + strconv.Itoa(S3Port), "-s3.port.https=" + strconv.Itoa(S3TLSPort),
					"-s3.config=" + s3ConfigDir + "/s3.json",
					"-s3.cert.file=" + s3TLSDir + "/tls.crt", "-s3.key.file=" + s3TLSDir + "/tls.key",
				},
				Ports:           []corev1.ContainerPort{{ContainerPort: S3Port}, {ContainerPort: S3TLSPort}},
				SecurityContext: Restricted(),
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(S3Port)}},
					PeriodSeconds: 1,
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "data", MountPath: s3DataDir},
					{Name: "tmp", MountPath: "/tmp"},
					{Name: "config", MountPath: s3ConfigDir, ReadOnly: true},
					{Name: "tls", MountPath: s3TLSDir, ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s3-server-config"}}},
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s3-server-tls"}}},
			},
		},
	}
	ready, _, err := e.ServePod(ctx, ns, pod,
		corev1.ServicePort{Name: "http", Port: S3Port, TargetPort: intstr.FromInt32(S3Port)},
		corev1.ServicePort{Name: "https", Port: S3TLSPort, TargetPort: intstr.FromInt32(S3TLSPort)})
	if err != nil {
		return nil, err
	}
	s := &S3Server{namespace: ns, pod: pod.Name, cs: e.CS, CA: ca.CertPEM, client: s3.New(s3.Options{
		BaseEndpoint: aws.String(fmt.Sprintf("http://%s:%d", ready.Status.PodIP, S3Port)),
		Region:       s3Region,
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: s3AdminAccessKeyID, SecretAccessKey: s3AdminSecretAccessKey}, nil
		}),
		HTTPClient: &http.Client{Timeout: 30 * time.Second},
	})}
	if err := e.waitS3Writable(ctx, s, bucket); err != nil {
		return nil, err
	}
	s.Startup = time.Since(created)
	return s, nil
}

// waitS3Writable creates bucket and writes and deletes an object in it, as
// soon as the server takes them: the port opens before the volume server
// has joined the master, and the first write to a bucket grows its volumes.
func (e *Env) waitS3Writable(ctx context.Context, s *S3Server, bucket string) error {
	var last error
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if last = s.CreateBucket(ctx, bucket); last != nil {
			return false, nil
		}
		const probe = "scene-probe"
		if _, last = s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(probe), Body: strings.NewReader(probe)}); last != nil {
			return false, nil
		}
		_, last = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String(probe)})
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the S3 server in %s took no write to bucket %s in %s: %w (last: %v)%s", s.namespace, bucket, time.Since(start).Round(time.Second), err, last, e.PodEvents(ctx, s.namespace, s.pod))
	}
	return nil
}

// s3Identities is the server's identity file: the scene's, which may do
// anything, and Glance's, which reads and writes objects.
func s3Identities() ([]byte, error) {
	type credential struct {
		AccessKey string `json:"accessKey"`
		SecretKey string `json:"secretKey"`
	}
	type identity struct {
		Name        string       `json:"name"`
		Credentials []credential `json:"credentials"`
		Actions     []string     `json:"actions"`
	}
	return json.Marshal(map[string][]identity{"identities": {
		{Name: "scene-admin", Credentials: []credential{{s3AdminAccessKeyID, s3AdminSecretAccessKey}}, Actions: []string{"Admin", "Read", "Write", "List", "Tagging"}},
		{Name: "glance", Credentials: []credential{{S3AccessKeyID, S3SecretAccessKey}}, Actions: []string{"Read", "Write", "List", "Tagging"}},
	}})
}

// CreateBucket creates a bucket; one that exists is no error: only the
// scene's identity may create buckets.
func (s *S3Server) CreateBucket(ctx context.Context, name string) error {
	_, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name})
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if errors.As(err, &owned) || errors.As(err, &exists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create S3 bucket %s: %w", name, err)
	}
	return nil
}

// Object reads an object of bucket, which counts as a read in
// ObjectReads; ok is false when there is none.
func (s *S3Server) Object(ctx context.Context, bucket, key string) (obj S3Object, ok bool, err error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	var missing *types.NoSuchKey
	if errors.As(err, &missing) {
		return obj, false, nil
	}
	if err != nil {
		return obj, false, fmt.Errorf("S3 object %s/%s: %w", bucket, key, err)
	}
	defer out.Body.Close()
	h := sha256.New()
	if obj.Size, err = io.Copy(h, out.Body); err != nil {
		return obj, false, fmt.Errorf("S3 object %s/%s: %w", bucket, key, err)
	}
	obj.SHA256, obj.ETag = hex.EncodeToString(h.Sum(nil)), aws.ToString(out.ETag)
	return obj, true, nil
}

// ObjectReads counts the GETs of an object of bucket that the server has
// logged, whoever sent them.
func (s *S3Server) ObjectReads(ctx context.Context, bucket, key string) (int, error) {
	b, err := s.cs.CoreV1().Pods(s.namespace).GetLogs(s.pod, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("the S3 server's log: %w", err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasSuffix(line, " GetObjectHandler "+bucket+" "+key) {
			n++
		}
	}
	return n, nil
}
