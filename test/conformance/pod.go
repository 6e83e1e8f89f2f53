//go:build linux

package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// objects are the ConfigMaps and Secrets of the namespace the rendered pod
// specs refer to, by name, as the operator would have applied them.
type objects struct {
	mu         sync.Mutex
	configMaps map[string]map[string]string
	secrets    map[string]map[string]string
}

func newObjects() *objects {
	return &objects{configMaps: map[string]map[string]string{}, secrets: map[string]map[string]string{}}
}

func (o *objects) putConfigMap(name string, data map[string]string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.configMaps[name] = data
}

func (o *objects) putSecret(name string, data map[string]string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.secrets[name] = data
}

func (o *objects) get(kind, name string) (map[string]string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var d map[string]string
	var ok bool
	if kind == "Secret" {
		d, ok = o.secrets[name]
	} else {
		d, ok = o.configMaps[name]
	}
	return d, ok
}

// service is something the rendered config points at, reachable inside every
// pod at host:port: the pod's /etc/hosts maps host to a loopback address of
// the pod's network namespace where the harness serves handler, or forwards
// to dial.
type service struct {
	host    string
	port    int
	handler http.Handler
	dial    func() (net.Conn, error)
}

// imageFile is a file the harness adds to the image (the overlay's upper
// layer): content and mode, or a whiteout hiding the root's file.
type imageFile struct {
	content  string
	mode     os.FileMode
	whiteout bool
}

// harness runs pods on the Debian root.
type harness struct {
	root     string
	dir      string
	objects  *objects
	services []service
	// image are the files every container's image has on top of the root.
	image map[string]imageFile

	mu   sync.Mutex
	seq  int
	uids map[int]string // root's /etc/passwd: uid -> home
}

// pod is one pod: its directory with the volumes, its network namespace
// and its /etc/hosts.
type pod struct {
	h       *harness
	t       testing.TB
	name    string
	dir     string
	spec    corev1.PodSpec
	ns      *netNS
	volumes map[string]string
	hosts   string
	hostIPs map[string]string
}

func (h *harness) newPod(t testing.TB, name string, spec corev1.PodSpec) *pod {
	t.Helper()
	h.mu.Lock()
	h.seq++
	dir := filepath.Join(h.dir, fmt.Sprintf("%02d-%s", h.seq, name))
	h.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ns, err := newNetNS()
	if err != nil {
		t.Fatal(err)
	}
	p := &pod{h: h, t: t, name: name, dir: dir, spec: spec, ns: ns, volumes: map[string]string{}, hostIPs: map[string]string{}}
	harnessLog, err := os.OpenFile(filepath.Join(dir, "harness.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var logMu sync.Mutex
	ns.logf = func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(harnessLog, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
	}
	t.Cleanup(func() { _ = harnessLog.Close() })
	t.Cleanup(ns.close)

	var hosts strings.Builder
	hosts.WriteString("# Kubernetes-managed hosts file (conformance harness).\n127.0.0.1\tlocalhost\n")
	fmt.Fprintf(&hosts, "127.0.0.1\t%s\n", name)
	addrs := p.hostIPs
	for _, s := range h.services {
		ip, ok := addrs[s.host]
		if !ok {
			ip = fmt.Sprintf("127.0.0.%d", 10+len(addrs))
			addrs[s.host] = ip
			fmt.Fprintf(&hosts, "%s\t%s\n", ip, s.host)
		}
		addr := net.JoinHostPort(ip, strconv.Itoa(s.port))
		if s.handler != nil {
			err = ns.serve(addr, s.handler)
		} else {
			err = ns.forward(addr, s.dial)
		}
		if err != nil {
			t.Fatalf("pod %s: serving %s:%d: %v", name, s.host, s.port, err)
		}
	}
	p.hosts = filepath.Join(dir, "hosts")
	if err := os.WriteFile(p.hosts, []byte(hosts.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, v := range spec.Volumes {
		path, err := p.makeVolume(v)
		if err != nil {
			t.Fatalf("pod %s: volume %s: %v", name, v.Name, err)
		}
		p.volumes[v.Name] = path
	}
	return p
}

func (p *pod) fsGroup() *int64 {
	if sc := p.spec.SecurityContext; sc != nil {
		return sc.FSGroup
	}
	return nil
}

// makeVolume lays a volume out as the kubelet does: ConfigMaps and Secrets
// through the atomic writer (a timestamped directory, ..data pointing at it,
// each key a symlink through ..data), with the mode and, under fsGroup, the
// group the kubelet gives them; emptyDirs world-writable and, under fsGroup,
// setgid to it.
func (p *pod) makeVolume(v corev1.Volume) (string, error) {
	dir := filepath.Join(p.dir, "volumes", v.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	fsGroup := p.fsGroup()
	switch {
	case v.EmptyDir != nil:
		mode := os.FileMode(0o777)
		if fsGroup != nil {
			if err := os.Chown(dir, 0, int(*fsGroup)); err != nil {
				return "", err
			}
			mode |= os.ModeSetgid
		}
		return dir, os.Chmod(dir, mode)
	case v.ConfigMap != nil:
		data, ok := p.h.objects.get("ConfigMap", v.ConfigMap.Name)
		if !ok && !ptr.Deref(v.ConfigMap.Optional, false) {
			return "", fmt.Errorf("ConfigMap %q does not exist", v.ConfigMap.Name)
		}
		return dir, project(dir, data, v.ConfigMap.Items, ptr.Deref(v.ConfigMap.DefaultMode, corev1.ConfigMapVolumeSourceDefaultMode), fsGroup)
	case v.Secret != nil:
		data, ok := p.h.objects.get("Secret", v.Secret.SecretName)
		if !ok && !ptr.Deref(v.Secret.Optional, false) {
			return "", fmt.Errorf("secret %q does not exist", v.Secret.SecretName)
		}
		return dir, project(dir, data, v.Secret.Items, ptr.Deref(v.Secret.DefaultMode, corev1.SecretVolumeSourceDefaultMode), fsGroup)
	}
	return "", errors.New("the harness supports only configMap, secret and emptyDir volumes")
}

func project(dir string, data map[string]string, items []corev1.KeyToPath, defaultMode int32, fsGroup *int64) error {
	type file struct {
		path string
		data string
		mode int32
	}
	var files []file
	if len(items) == 0 {
		for k, v := range data {
			files = append(files, file{k, v, defaultMode})
		}
	} else {
		for _, it := range items {
			v, ok := data[it.Key]
			if !ok {
				return fmt.Errorf("key %q does not exist", it.Key)
			}
			files = append(files, file{it.Path, v, ptr.Deref(it.Mode, defaultMode)})
		}
	}
	ts := "..2026_01_01_00_00_00.000000001"
	tsDir := filepath.Join(dir, ts)
	if err := os.MkdirAll(tsDir, 0o755); err != nil {
		return err
	}
	top := map[string]bool{}
	for _, f := range files {
		if strings.HasPrefix(f.path, "..") || strings.HasPrefix(f.path, "/") {
			return fmt.Errorf("path %q is not allowed", f.path)
		}
		path := filepath.Join(tsDir, f.path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(f.mode) & os.ModePerm
		if fsGroup != nil {
			mode |= 0o440
		}
		if err := os.WriteFile(path, []byte(f.data), mode); err != nil {
			return err
		}
		if err := os.Chmod(path, mode); err != nil {
			return err
		}
		if fsGroup != nil {
			if err := os.Chown(path, 0, int(*fsGroup)); err != nil {
				return err
			}
		}
		top[strings.Split(f.path, "/")[0]] = true
	}
	if err := os.Symlink(ts, filepath.Join(dir, "..data")); err != nil {
		return err
	}
	for name := range top {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// runOptions are what a test adds to a container beyond its spec: never
// part of what the operator renders.
type runOptions struct {
	// env is appended after the container's own env (test-only overrides).
	env []string
	// image are files added to this container's image only.
	image map[string]imageFile
}

// process is a started container.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
	exitAt  time.Time
}

var envRefPattern = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$`)

// expandRefs applies Kubernetes' $(VAR) expansion.
func expandRefs(s string, vars map[string]string) string {
	return envRefPattern.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// podIP is a pod's status.podIP in the harness.
const podIP = "127.0.0.1"

// environment resolves a container's env as the kubelet does: the image's
// PATH and HOME, HOSTNAME, then env (values, Secret and ConfigMap keys, the
// pod's IP) in order with $(VAR) expansion.
func (p *pod) environment(c corev1.Container, uid int) ([]string, error) {
	var names []string
	vars := map[string]string{}
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			names = append(names, k)
		}
		vars[k] = v
	}
	set("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	set("HOSTNAME", p.name)
	set("HOME", p.h.home(uid))
	for _, ef := range c.EnvFrom {
		var data map[string]string
		var ok bool
		switch {
		case ef.SecretRef != nil:
			data, ok = p.h.objects.get("Secret", ef.SecretRef.Name)
		case ef.ConfigMapRef != nil:
			data, ok = p.h.objects.get("ConfigMap", ef.ConfigMapRef.Name)
		}
		if !ok {
			return nil, fmt.Errorf("envFrom of container %s: source missing", c.Name)
		}
		for _, k := range slices.Sorted(maps.Keys(data)) {
			set(ef.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			set(e.Name, expandRefs(e.Value, vars))
		case e.ValueFrom.SecretKeyRef != nil:
			r := e.ValueFrom.SecretKeyRef
			data, ok := p.h.objects.get("Secret", r.Name)
			v, has := data[r.Key]
			switch {
			case ok && has:
				set(e.Name, v)
			case !ptr.Deref(r.Optional, false):
				return nil, fmt.Errorf("env %s of container %s: secret %s has no key %q", e.Name, c.Name, r.Name, r.Key)
			}
			// An optional key that is missing leaves the variable unset,
			// as the kubelet does.
		case e.ValueFrom.ConfigMapKeyRef != nil:
			r := e.ValueFrom.ConfigMapKeyRef
			data, ok := p.h.objects.get("ConfigMap", r.Name)
			v, has := data[r.Key]
			switch {
			case ok && has:
				set(e.Name, v)
			case !ptr.Deref(r.Optional, false):
				return nil, fmt.Errorf("env %s of container %s: configmap %s has no key %q", e.Name, c.Name, r.Name, r.Key)
			}
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			// The pod's own address: its network namespace's loopback,
			// where its servers listen and its peers would reach it.
			set(e.Name, podIP)
		default:
			return nil, fmt.Errorf("env %s of container %s: the harness resolves only values, secretKeyRef, configMapKeyRef and status.podIP", e.Name, c.Name)
		}
	}
	env := make([]string, 0, len(names))
	for _, k := range names {
		env = append(env, k+"="+vars[k])
	}
	return env, nil
}

// identity is the user, group and supplementary groups a container runs
// as, from the container's securityContext over the pod's.
func (p *pod) identity(c corev1.Container) (uid, gid int, groups []int, noNewPrivs, roRoot bool) {
	var runAsUser, runAsGroup *int64
	if sc := p.spec.SecurityContext; sc != nil {
		runAsUser, runAsGroup = sc.RunAsUser, sc.RunAsGroup
		if sc.FSGroup != nil {
			groups = append(groups, int(*sc.FSGroup))
		}
		for _, g := range sc.SupplementalGroups {
			groups = append(groups, int(g))
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			runAsUser = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			runAsGroup = sc.RunAsGroup
		}
		noNewPrivs = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
		roRoot = ptr.Deref(sc.ReadOnlyRootFilesystem, false)
	}
	uid = int(ptr.Deref(runAsUser, 0))
	gid = int(ptr.Deref(runAsGroup, 0))
	return uid, gid, groups, noNewPrivs, roRoot
}

// start runs container c of the pod.
func (p *pod) start(c corev1.Container, o runOptions) (*process, error) {
	if len(c.Command) == 0 {
		return nil, fmt.Errorf("container %s has no command: the harness's image has no entrypoint", c.Name)
	}
	uid, gid, groups, noNewPrivs, roRoot := p.identity(c)
	env, err := p.environment(c, uid)
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		vars[k] = v
	}
	env = append(env, o.env...)
	var argv []string
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		argv = append(argv, expandRefs(a, vars))
	}

	p.h.mu.Lock()
	p.h.seq++
	cdir := filepath.Join(p.dir, "containers", fmt.Sprintf("%02d-%s", p.h.seq, c.Name))
	p.h.mu.Unlock()
	spec := sandboxSpec{
		Lower:        p.h.root,
		Upper:        filepath.Join(cdir, "upper"),
		Work:         filepath.Join(cdir, "work"),
		RootFS:       filepath.Join(cdir, "rootfs"),
		ReadOnlyRoot: roRoot,
		Hostname:     p.name,
		UID:          uid,
		GID:          gid,
		Groups:       groups,
		NoNewPrivs:   noNewPrivs,
		Argv:         argv,
		Env:          env,
		Dir:          c.WorkingDir,
		NetNS:        true,
	}
	for _, d := range []string{spec.Upper, spec.Work, spec.RootFS} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	files := map[string]imageFile{}
	for k, v := range p.h.image {
		files[k] = v
	}
	for k, v := range o.image {
		files[k] = v
	}
	if err := p.h.layImage(spec.Upper, files); err != nil {
		return nil, err
	}
	spec.Mounts = append(spec.Mounts, sandboxMount{Source: p.hosts, Target: "/etc/hosts", ReadOnly: true})
	for _, m := range c.VolumeMounts {
		src, ok := p.volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("container %s mounts volume %q, which the pod does not have", c.Name, m.Name)
		}
		if m.SubPath != "" {
			src = filepath.Join(src, m.SubPath)
		}
		spec.Mounts = append(spec.Mounts, sandboxMount{Source: src, Target: m.MountPath, ReadOnly: m.ReadOnly})
	}
	specPath := filepath.Join(cdir, "sandbox.json")
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(specPath, data, 0o600); err != nil {
		return nil, err
	}
	logPath := filepath.Join(p.dir, "logs", c.Name+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = []string{sandboxEnv + "=" + specPath}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.ExtraFiles = []*os.File{p.ns.fd}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := startProcess(cmd); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting container %s: %w", c.Name, err)
	}
	pr := &process{name: c.Name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		pr.err = cmd.Wait()
		pr.exitAt = time.Now()
		_ = logFile.Close()
		close(pr.done)
	}()
	p.t.Cleanup(func() { pr.kill() })
	return pr, nil
}

// kill ends the container and everything in it.
func (pr *process) kill() {
	select {
	case <-pr.done:
		return
	default:
	}
	_ = pr.cmd.Process.Signal(syscall.SIGKILL)
	<-pr.done
}

// running reports whether the container's process is alive.
func (pr *process) running() bool {
	select {
	case <-pr.done:
		return false
	default:
		return true
	}
}

// wait waits up to timeout for the container to exit and returns its exit
// error (nil for status 0).
func (pr *process) wait(timeout time.Duration) (exited bool, err error) {
	select {
	case <-pr.done:
		return true, pr.err
	case <-time.After(timeout):
		return false, nil
	}
}

// logs returns the container's output so far.
func (pr *process) logs() string {
	b, _ := os.ReadFile(pr.logPath)
	return string(b)
}

// tail returns the last n lines of the container's output.
func (pr *process) tail(n int) string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader([]byte(pr.logs())))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// runToCompletion runs a pod's init containers one after another, then its
// containers together, as the kubelet runs a Job's pod with restartPolicy
// Never: every one must exit 0 within timeout.
func (p *pod) runToCompletion(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, c := range p.spec.InitContainers {
		if err := p.runOne(c, time.Until(deadline)); err != nil {
			return err
		}
	}
	errs := make([]error, len(p.spec.Containers))
	var wg sync.WaitGroup
	for i, c := range p.spec.Containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.runOne(c, time.Until(deadline))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (p *pod) runOne(c corev1.Container, timeout time.Duration) error {
	pr, err := p.start(c, runOptions{})
	if err != nil {
		return err
	}
	exited, err := pr.wait(timeout)
	if !exited {
		pr.kill()
		return fmt.Errorf("container %s (%s) did not finish within %s; its output:\n%s", c.Name, strings.Join(c.Command, " "), timeout.Round(time.Second), pr.tail(40))
	}
	if err != nil {
		return fmt.Errorf("container %s (%s): %v; its output:\n%s", c.Name, strings.Join(c.Command, " "), err, pr.tail(40))
	}
	return nil
}

// home is HOME for uid as a container runtime sets it: the home directory
// of the image's passwd entry, else "/".
func (h *harness) home(uid int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.uids == nil {
		h.uids = map[int]string{}
		if data, err := os.ReadFile(filepath.Join(h.root, "etc/passwd")); err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				f := strings.Split(line, ":")
				if len(f) < 7 {
					continue
				}
				if n, err := strconv.Atoi(f[2]); err == nil {
					h.uids[n] = f[5]
				}
			}
		}
	}
	if home, ok := h.uids[uid]; ok && home != "" {
		return home
	}
	return "/"
}

// layImage writes files into an overlay upper directory. Parent directories
// copy the root's mode and owner, so adding a file does not change who may
// traverse them.
func (h *harness) layImage(upper string, files map[string]imageFile) error {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f := files[p]
		target := filepath.Join(upper, p)
		if err := h.mirrorDirs(upper, filepath.Dir(p)); err != nil {
			return err
		}
		if f.whiteout {
			if err := syscall.Mknod(target, syscall.S_IFCHR, 0); err != nil {
				return fmt.Errorf("whiteout %s: %w", p, err)
			}
			continue
		}
		if err := os.WriteFile(target, []byte(f.content), f.mode); err != nil {
			return err
		}
		if err := os.Chmod(target, f.mode); err != nil {
			return err
		}
	}
	return nil
}

func (h *harness) mirrorDirs(upper, dir string) error {
	dir = filepath.Clean("/" + dir)
	if dir == "/" {
		return nil
	}
	if err := h.mirrorDirs(upper, filepath.Dir(dir)); err != nil {
		return err
	}
	target := filepath.Join(upper, dir)
	if _, err := os.Lstat(target); err == nil {
		return nil
	}
	mode, uid, gid := os.FileMode(0o755), 0, 0
	if fi, err := os.Lstat(filepath.Join(h.root, dir)); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory in the root", dir)
		}
		mode = fi.Mode() & (os.ModePerm | os.ModeSetgid | os.ModeSticky)
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	}
	if err := os.Mkdir(target, mode); err != nil {
		return err
	}
	if err := os.Chmod(target, mode); err != nil {
		return err
	}
	return os.Chown(target, uid, gid)
}
