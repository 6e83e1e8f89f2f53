package controlplane

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The real node's place on this machine. Its bridge, nftables table,
// routes and sysctls are machine-wide, so one real node runs on a machine
// at a time: StartCluster waits for the one before it to stop.
const (
	// NodeName is the real node's Node.
	NodeName = "glance-node"
	// NodeIP is the node's address and the gateway of the pod network, on
	// the node's own bridge; kube-apiserver listens there so pods reach it.
	NodeIP = "10.88.0.1"
	// PodCIDR holds every pod address; ServiceCIDR every ClusterIP.
	PodCIDR     = "10.88.0.0/16"
	ServiceCIDR = "10.96.0.0/16"
	// ClusterDNSIP is CoreDNS's Service.
	ClusterDNSIP = "10.96.0.10"
	// ClusterDomain is the only zone the cluster's DNS answers.
	ClusterDomain = "cluster.local"

	nodeBridge = "glnode0"
	// guardTable is the nftables table (family inet) that keeps the node's
	// traffic on this machine.
	guardTable = "glance-realnode"
	// nodeStateDir holds the lock and the record of what the running real
	// node changed on the machine, outside the cluster's own directory so
	// the next run finds it after a crash.
	nodeStateDir = "/run/glance-operator-realnode"
)

// nodeSysctls are the kernel settings the node changes: the pod network
// forwards, and the kubelet sets its kernel tunables. Each is put back.
var nodeSysctls = []string{
	"net/ipv4/ip_forward",
	"net/bridge/bridge-nf-call-iptables",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// hostRecord is what a real node changed on the machine, written before the
// first change, so a cleanup after a crash puts it back.
type hostRecord struct {
	// Dir is the cluster's directory: mounts and processes under it are the
	// node's.
	Dir string `json:"dir"`
	// Sysctls are the values before the node started.
	Sysctls map[string]string `json:"sysctls"`
	// NFTTables existed before the node started ("family name"); the
	// kubelet and kube-proxy add theirs, which go.
	NFTTables []string `json:"nftTables"`
	// Socket is containerd's socket; the shims name it.
	Socket string `json:"socket"`
}

// lockHost takes the machine's real-node lock, waiting for a running node
// to stop, and cleans up after a node whose run crashed.
func lockHost(ctx context.Context) (unlock func(), err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("a real node needs root: the kubelet, containerd and the pod network change the machine")
	}
	f, err := lockFile(ctx, "lock", "the real node another run holds")
	if err != nil {
		return nil, err
	}
	unlock = func() { f.Close() }
	if err := CleanupHost(); err != nil {
		unlock()
		return nil, fmt.Errorf("clean up after an earlier real node: %w", err)
	}
	return unlock, nil
}

func recordPath() string { return filepath.Join(nodeStateDir, "record.json") }

// prepareHost records the machine's state, then makes the node's network:
// its bridge, a route for the service range to it, and the guard.
//
// The guard is the network rule of this machine: no packet from a pod, a
// hostNetwork pod or to a Service address may leave through another
// interface. Forwarding between the bridge and anything else is dropped,
// and so is output to the pod or service range through anything but the
// bridge and loopback. The route keeps this machine's own requests to a
// ClusterIP on the bridge, where kube-proxy translates them, instead of on
// the default route.
func prepareHost(dir, socket string) error {
	rec := hostRecord{Dir: dir, Socket: socket, Sysctls: map[string]string{}}
	for _, s := range nodeSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", s))
		if err != nil {
			return fmt.Errorf("read sysctl %s: %w", s, err)
		}
		rec.Sysctls[s] = strings.TrimSpace(string(v))
	}
	tables, err := nftTables()
	if err != nil {
		return err
	}
	rec.NFTTables = tables
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := os.WriteFile(recordPath(), b, 0o600); err != nil {
		return err
	}

	if err := run("ip", "link", "add", nodeBridge, "type", "bridge"); err != nil {
		return err
	}
	if err := run("ip", "addr", "add", NodeIP+"/16", "dev", nodeBridge); err != nil {
		return err
	}
	if err := run("ip", "link", "set", nodeBridge, "up"); err != nil {
		return err
	}
	guard := fmt.Sprintf(`table inet %[1]s {
  chain forward {
    type filter hook forward priority filter - 10; policy accept;
    iifname "%[2]s" oifname != "%[2]s" counter drop
    oifname "%[2]s" iifname != "%[2]s" counter drop
  }
  chain output {
    type filter hook output priority filter - 10; policy accept;
    oifname != { "%[2]s", "lo" } ip daddr { %[3]s, %[4]s } counter drop
  }
}
`, guardTable, nodeBridge, PodCIDR, ServiceCIDR)
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(guard)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft -f (the guard): %w: %s", err, strings.TrimSpace(string(out)))
	}
	if err := run("ip", "route", "add", ServiceCIDR, "dev", nodeBridge); err != nil {
		return err
	}
	return writeSysctl("net/ipv4/ip_forward", "1")
}

// GuardCounters returns the packets the guard dropped so far: forwarded
// from or to the bridge, and sent by this machine towards the pod or
// service range through another interface.
func GuardCounters() (forward, output int, err error) {
	out, err := exec.Command("nft", "list", "table", "inet", guardTable).CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("nft list table inet %s: %w: %s", guardTable, err, strings.TrimSpace(string(out)))
	}
	chain := ""
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == "chain" {
			chain = fields[1]
		}
		i := slices.Index(fields, "packets")
		if i < 0 || i+1 >= len(fields) {
			continue
		}
		n, err := strconv.Atoi(fields[i+1])
		if err != nil {
			return 0, 0, fmt.Errorf("guard counter %q: %w", line, err)
		}
		switch chain {
		case "forward":
			forward += n
		case "output":
			output += n
		}
	}
	return forward, output, nil
}

// CleanupHost undoes what a real node did to the machine, by the record its
// run left: it kills the pods' processes and containerd's shims, unmounts
// everything under the cluster's directory, removes the kubelet's cgroups,
// the bridge, the routes, the nftables tables the node added, and puts the
// sysctls back. The node's own processes (kubelet, containerd, the control
// plane) are stopped before, by their PIDs. Without a record it does
// nothing.
func CleanupHost() error { return cleanupHostOf("") }

// cleanupHostOf is CleanupHost for the node of the cluster directory dir
// alone (any node when dir is empty).
func cleanupHostOf(dir string) error {
	b, err := os.ReadFile(recordPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var rec hostRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return fmt.Errorf("%s: %w", recordPath(), err)
	}
	if dir != "" && rec.Dir != dir {
		return nil
	}
	var errs []error
	// Pods first: their processes hold the mounts and the cgroups.
	errs = append(errs, killAll(podProcesses))
	errs = append(errs, killAll(func() []int { return shimProcesses(rec.Socket) }))
	errs = append(errs, unmountUnder(rec.Dir))
	errs = append(errs, removeCgroups())
	for _, l := range containerLogLinks(rec.Dir) {
		errs = append(errs, os.Remove(l))
	}
	if _, err := os.Stat("/sys/class/net/" + nodeBridge); err == nil {
		// A pod's veth goes with its network namespace, which the kernel
		// may keep for minutes after its processes died (its sockets
		// linger): delete the bridge's ports first.
		ports, err := os.ReadDir("/sys/class/net/" + nodeBridge + "/brif")
		errs = append(errs, err)
		for _, p := range ports {
			if err := run("ip", "link", "del", p.Name()); err != nil {
				if _, gone := os.Stat("/sys/class/net/" + p.Name()); gone == nil {
					errs = append(errs, err)
				}
			}
		}
		// The route through the bridge goes with it.
		errs = append(errs, run("ip", "link", "del", nodeBridge))
	}
	tables, err := nftTables()
	errs = append(errs, err)
	for _, t := range tables {
		if !slices.Contains(rec.NFTTables, t) {
			errs = append(errs, run("nft", append([]string{"delete", "table"}, strings.Fields(t)...)...))
		} else {
			errs = append(errs, removeKubeChains(t))
		}
	}
	for _, s := range nodeSysctls {
		if v, ok := rec.Sysctls[s]; ok {
			errs = append(errs, writeSysctl(s, v))
		}
	}
	// containerd 1.6 keeps shim sockets and fifos under /run/containerd
	// whatever its state directory: remove the sockets of the killed shims
	// and what is left empty.
	for _, f := range staleShimSockets() {
		errs = append(errs, os.Remove(f))
	}
	removeEmptyDirs("/run/containerd")
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.Remove(recordPath())
}

// HostLeftovers lists what a real node of the cluster directory dir has on
// the machine: processes, mounts, cgroups, its bridge and veths, routes to
// the pod and service ranges, nftables tables of the node, kube-proxy, the
// NetworkPolicy enforcer and the kubelet. It is empty when the machine is as before the node.
func HostLeftovers(dir string) ([]string, error) {
	var found []string
	for _, pid := range podProcesses() {
		found = append(found, fmt.Sprintf("pod process %d (%s)", pid, cmdline(pid)))
	}
	for _, pid := range allProcesses() {
		c := cmdline(pid)
		if strings.Contains(c, dir) || strings.Contains(c, "containerd-shim") {
			found = append(found, fmt.Sprintf("process %d (%s)", pid, c))
		}
	}
	mounts, err := mountsUnder(dir)
	if err != nil {
		return nil, err
	}
	for _, m := range mounts {
		found = append(found, "mount "+m)
	}
	for _, c := range nodeCgroups() {
		found = append(found, "cgroup "+c)
	}
	for _, l := range containerLogLinks(dir) {
		found = append(found, "log link "+l)
	}
	links, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		if l.Name() == nodeBridge || strings.HasPrefix(l.Name(), "veth") {
			found = append(found, "link "+l.Name())
		}
	}
	routes, err := exec.Command("ip", "route", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("ip route show: %w", err)
	}
	for _, r := range strings.Split(strings.TrimSpace(string(routes)), "\n") {
		if strings.HasPrefix(r, "10.88.") || strings.HasPrefix(r, "10.96.") {
			found = append(found, "route "+r)
		}
	}
	tables, err := nftTables()
	if err != nil {
		return nil, err
	}
	for _, t := range tables {
		if strings.HasSuffix(t, " "+guardTable) || strings.HasSuffix(t, " kube-proxy") || strings.HasSuffix(t, " "+NetworkPolicyEnforcer) {
			found = append(found, "nftables table "+t)
		}
	}
	// The kubelet's, kube-proxy's and the enforcer's iptables-nft chains.
	for _, t := range tables {
		out, err := exec.Command("nft", append([]string{"list", "table"}, strings.Fields(t)...)...).Output()
		if err == nil && (strings.Contains(string(out), "KUBE-") || strings.Contains(string(out), networkPolicyChain)) {
			found = append(found, "nftables table "+t+" with the node's chains")
		}
	}
	for _, f := range staleShimSockets() {
		found = append(found, "stale shim socket "+f)
	}
	if _, err := os.Stat(recordPath()); err == nil {
		found = append(found, "record "+recordPath())
	}
	return found, nil
}

// shimSocketDir is where containerd 1.6 puts its shims' sockets, whatever
// its configuration says.
const shimSocketDir = "/run/containerd/s"

// staleShimSockets are the shim sockets no process listens on: those of
// shims that were killed.
func staleShimSockets() []string {
	entries, err := os.ReadDir(shimSocketDir)
	if err != nil {
		return nil
	}
	listening, _ := os.ReadFile("/proc/net/unix")
	var stale []string
	for _, e := range entries {
		p := filepath.Join(shimSocketDir, e.Name())
		if e.Type()&fs.ModeSocket != 0 && !strings.Contains(string(listening), " "+p+"\n") {
			stale = append(stale, p)
		}
	}
	return stale
}

// nodeChain reports whether an iptables chain is the node's: the kubelet's
// and kube-proxy's KUBE- chains, and the one that steers packets to the
// NetworkPolicy enforcer.
func nodeChain(name string) bool {
	return strings.HasPrefix(name, "KUBE-") || name == networkPolicyChain
}

// removeKubeChains removes the node's chains (nodeChain), and the rules
// that jump to them, from an iptables-nft table that was there before the
// node.
func removeKubeChains(table string) error {
	family, name, _ := strings.Cut(table, " ")
	tool := map[string]string{"ip": "iptables", "ip6": "ip6tables"}[family]
	if tool == "" {
		return nil
	}
	out, err := exec.Command(tool, "-t", name, "-S").Output()
	if err != nil {
		return nil // not an iptables table
	}
	var chains []string
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "-N" && nodeChain(f[1]):
			chains = append(chains, f[1])
		case len(f) > 2 && f[0] == "-A" && !nodeChain(f[1]) && slices.ContainsFunc(f, nodeChain):
			errs = append(errs, run(tool, append([]string{"-t", name, "-D"}, f[1:]...)...))
		}
	}
	for _, c := range chains {
		errs = append(errs, run(tool, "-t", name, "-F", c))
	}
	for _, c := range chains {
		errs = append(errs, run(tool, "-t", name, "-X", c))
	}
	return errors.Join(errs...)
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func writeSysctl(name, value string) error {
	return os.WriteFile(filepath.Join("/proc/sys", name), []byte(value), 0o644)
}

// nftTables lists the machine's nftables tables as "family name".
func nftTables() ([]string, error) {
	out, err := exec.Command("nft", "list", "tables").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("nft list tables (Debian package nftables): %w: %s", err, strings.TrimSpace(string(out)))
	}
	var tables []string
	for _, line := range strings.Split(string(out), "\n") {
		if t, ok := strings.CutPrefix(strings.TrimSpace(line), "table "); ok {
			tables = append(tables, t)
		}
	}
	return tables, nil
}

func allProcesses() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// cgroupRoots are the top-level cgroups the kubelet (kubepods) and
// containerd (k8s.io, for a task run outside the CRI) create in each
// hierarchy.
var cgroupRoots = []string{"kubepods", "k8s.io"}

func nodeCgroups() []string {
	var found []string
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hierarchies {
		for _, r := range cgroupRoots {
			if st, err := os.Stat(filepath.Join(h, r)); err == nil && st.IsDir() {
				found = append(found, filepath.Join(h, r))
			}
		}
	}
	return found
}

// podProcesses are the processes in the node's cgroups: every container's.
func podProcesses() []int {
	seen := map[int]bool{}
	for _, root := range nodeCgroups() {
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	pids := make([]int, 0, len(seen))
	for pid := range seen {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids
}

// shimProcesses are containerd's shims for the node's containerd, which
// outlive it.
func shimProcesses(socket string) []int {
	var pids []int
	for _, pid := range allProcesses() {
		c := cmdline(pid)
		if strings.Contains(c, "containerd-shim") && strings.Contains(c, "-address "+socket) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killAll sends SIGKILL to what list returns until it returns nothing.
func killAll(list func() []int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids := list()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v survived SIGKILL for 30s", pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// mountsUnder lists the mount points under dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		// Octal escapes (\040 for a space) stay: the directories the node
		// uses have none.
		mp := fields[4]
		if mp == dir || strings.HasPrefix(mp, dir+"/") || strings.HasPrefix(mp, "/run/containerd/") {
			mounts = append(mounts, mp)
		}
	}
	slices.SortFunc(mounts, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(mounts), s.Err()
}

func unmountUnder(dir string) error {
	var errs []error
	for range 3 { // a lazy unmount can reveal a mount beneath
		mounts, err := mountsUnder(dir)
		if err != nil || len(mounts) == 0 {
			return err
		}
		errs = nil
		for _, m := range mounts {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
			}
		}
	}
	return errors.Join(errs...)
}

// removeCgroups removes the node's cgroups, deepest first; they are empty
// once the pods' processes are gone.
func removeCgroups() error {
	var errs []error
	for _, root := range nodeCgroups() {
		for _, d := range dirsDeepestFirst(root) {
			var err error
			for range 50 { // a killed process leaves its cgroup a moment later
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

func removeEmptyDirs(root string) {
	for _, d := range dirsDeepestFirst(root) {
		_ = syscall.Rmdir(d) // fails, and stays, when not empty
	}
}

// dirsDeepestFirst lists root and the directories below it, children
// before their parents.
func dirsDeepestFirst(root string) []string {
	var dirs []string
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
	return dirs
}

// containerLogsDir is where the kubelet links each container's log, whatever
// its podLogsDir.
const containerLogsDir = "/var/log/containers"

// containerLogLinks are the kubelet's links to the logs of the node of the
// cluster directory dir.
func containerLogLinks(dir string) []string {
	entries, err := os.ReadDir(containerLogsDir)
	if err != nil {
		return nil
	}
	var links []string
	for _, e := range entries {
		p := filepath.Join(containerLogsDir, e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir+"/") {
			links = append(links, p)
		}
	}
	return links
}

// LockSuite takes the machine's lock for a whole suite of real nodes, so
// that the suites `go test ./...` runs side by side take turns as a whole
// rather than node by node: a suite that starts a second node (a crashed
// run's) gets it while it holds this lock. unlock releases it.
func LockSuite(ctx context.Context) (unlock func(), err error) {
	f, err := lockFile(ctx, "suite.lock", "the real-node suite another run holds")
	if err != nil {
		return nil, err
	}
	return func() { f.Close() }, nil
}

// lockFile takes an exclusive lock on name in the node's state directory,
// waiting for its holder (what) until ctx ends.
func lockFile(ctx context.Context, name, what string) (*os.File, error) {
	if err := os.MkdirAll(nodeStateDir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(nodeStateDir, name), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for %s (%s): %w", what, f.Name(), ctx.Err())
		case <-time.After(time.Second):
		}
	}
}
