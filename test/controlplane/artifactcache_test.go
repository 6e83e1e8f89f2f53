package controlplane

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestArtifactCacheAgreesWithTheScripts: the Go suites look the cache up
// where hack/artifact-cache.sh puts it, under each way of setting it.
func TestArtifactCacheAgreesWithTheScripts(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	for _, env := range []map[string]string{
		{"HOME": home, "XDG_CACHE_HOME": "", ArtifactCacheEnv: ""},
		{"HOME": home, "XDG_CACHE_HOME": filepath.Join(home, "xdg"), ArtifactCacheEnv: ""},
		{"HOME": home, "XDG_CACHE_HOME": filepath.Join(home, "xdg"), ArtifactCacheEnv: filepath.Join(home, "mine")},
	} {
		for k, v := range env {
			t.Setenv(k, v)
		}
		out, err := exec.Command(filepath.Join(root, "hack", "artifact-cache.sh"), "dir").Output()
		if err != nil {
			t.Fatalf("hack/artifact-cache.sh dir: %v", err)
		}
		got, err := ArtifactCache()
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.TrimSpace(string(out)); got != want {
			t.Errorf("with %v: ArtifactCache() = %s, the script says %s", env, got, want)
		}
	}
}

// TestAChangedInputRebuildsOnlyItsBinaries: each binary's cache entry is
// named by the inputs it is built from, so changing CoreDNS's module moves
// CoreDNS's entry and no other, changing kube-network-policies' or
// SeaweedFS's module moves its entry alone, changing the Kubernetes tools
// module moves the Kubernetes binaries' and not cert-manager's, CoreDNS's,
// kube-network-policies', SeaweedFS's or the oldest Kubernetes', and changing the oldest's moves its kube-apiserver
// alone.
func TestAChangedInputRebuildsOnlyItsBinaries(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// A copy of the script and the inputs it digests.
	tree := t.TempDir()
	for _, pattern := range []string{"hack/build-control-plane.sh", "hack/artifact-cache.sh", "hack/tools/*/go.mod", "hack/tools/*/go.sum", "hack/tools/*/*.go"} {
		files, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v (%d files)", pattern, err, len(files))
		}
		for _, f := range files {
			rel, _ := filepath.Rel(root, f)
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			mode := os.FileMode(0o644)
			if strings.HasSuffix(f, ".sh") {
				mode = 0o755
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(tree, rel)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tree, rel), data, mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	keys := func() map[string]string {
		t.Helper()
		m := map[string]string{}
		for _, set := range []string{"all", "node", "oldest"} {
			out, err := exec.Command(filepath.Join(tree, "hack", "build-control-plane.sh"), "keys", set).CombinedOutput()
			if err != nil {
				t.Fatalf("build-control-plane.sh keys %s: %v\n%s", set, err, out)
			}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				name, entry, ok := strings.Cut(line, " ")
				if !ok || !strings.HasPrefix(entry, "k8s/v1.") || !strings.Contains(entry, "/"+name+"-") {
					t.Fatalf("keys line %q: want NAME k8s/VERSION/NAME-<digest>", line)
				}
				m[set+"/"+name] = entry
			}
		}
		return m
	}
	appendTo := func(rel, text string) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(tree, rel), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(text); err != nil {
			t.Fatal(err)
		}
	}
	changed := func(before, after map[string]string) []string {
		var names []string
		for name, entry := range after {
			if before[name] != entry {
				names = append(names, name)
			}
		}
		return names
	}

	before := keys()
	if len(before) != 14 {
		t.Fatalf("keys: %v, want the 8 entries of all, the 5 of node and oldest's kube-apiserver", before)
	}
	if before["all/kube-apiserver"] == before["oldest/kube-apiserver"] {
		t.Fatalf("both Kubernetes versions' kube-apiserver share the entry %s", before["all/kube-apiserver"])
	}
	if again := keys(); len(changed(before, again)) != 0 {
		t.Fatalf("the same inputs gave other entries: %v, then %v", before, again)
	}

	appendTo("hack/tools/coredns/main.go", "\n// a change\n")
	afterDNS := keys()
	if got := changed(before, afterDNS); len(got) != 1 || got[0] != "node/coredns" {
		t.Errorf("changing CoreDNS's main.go moved %v, want coredns alone", got)
	}

	appendTo("hack/tools/kube-network-policies/go.sum", "example.com/x v0.0.0 h1:x=\n")
	afterNetpol := keys()
	if got := changed(afterDNS, afterNetpol); len(got) != 1 || got[0] != "node/kube-network-policies" {
		t.Errorf("changing kube-network-policies' module moved %v, want kube-network-policies alone", got)
	}

	appendTo("hack/tools/seaweedfs/go.sum", "example.com/x v0.0.0 h1:x=\n")
	afterWeed := keys()
	if got := changed(afterNetpol, afterWeed); len(got) != 1 || got[0] != "node/seaweedfs" {
		t.Errorf("changing SeaweedFS's module moved %v, want seaweedfs alone", got)
	}

	appendTo("hack/tools/kubernetes/go.sum", "example.com/x v0.0.0 h1:x=\n")
	afterK8s := keys()
	got := changed(afterWeed, afterK8s)
	for _, name := range got {
		if name == "node/coredns" || name == "node/kube-network-policies" || name == "node/seaweedfs" || name == "all/cert-manager" || name == "oldest/kube-apiserver" {
			t.Errorf("changing the Kubernetes tools module moved %s", name)
		}
	}
	if len(got) != 9 {
		t.Errorf("changing the Kubernetes tools module moved %v, want the 9 binaries and stages built from it", got)
	}

	appendTo("hack/tools/kubernetes-oldest/go.sum", "example.com/x v0.0.0 h1:x=\n")
	if got := changed(afterK8s, keys()); len(got) != 1 || got[0] != "oldest/kube-apiserver" {
		t.Errorf("changing the oldest Kubernetes' tools module moved %v, want its kube-apiserver alone", got)
	}
}
