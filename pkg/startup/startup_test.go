package startup

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		code     int
		ok       bool
		stderrOf string
	}{
		{nil, 0, true, ""},
		{[]string{"-log-level=debug"}, 0, true, ""},
		{[]string{"-help"}, 0, false, "Usage"},
		{[]string{"-no-such-flag"}, 2, false, "no-such-flag"},
		{[]string{"extra"}, 2, false, `glance-test: unexpected arguments ["extra"]`},
	} {
		var out bytes.Buffer
		fs := flag.NewFlagSet("glance-test", flag.ContinueOnError)
		fs.SetOutput(&out)
		var f Flags
		f.Register(fs, Usage{Kubeconfig: "kubeconfig", Calls: "the calls", LogLevel: "log level"})
		code, ok := Parse(fs, tc.args)
		if code != tc.code || ok != tc.ok {
			t.Errorf("%q: (%d, %v), want (%d, %v)", tc.args, code, ok, tc.code, tc.ok)
		}
		if !strings.Contains(out.String(), tc.stderrOf) {
			t.Errorf("%q: output %q lacks %q", tc.args, out.String(), tc.stderrOf)
		}
	}
}

func TestRESTConfig(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("glance-test", flag.ContinueOnError)
	var f Flags
	f.Register(fs, Usage{})
	if err := fs.Parse([]string{"-kubeconfig=" + kubeconfig, "-kube-api-qps=7", "-kube-api-burst=9"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.RESTConfig("glance-test")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || cfg.QPS != 7 || cfg.Burst != 9 || cfg.UserAgent != "glance-test" {
		t.Errorf("config host %q qps %v burst %d agent %q", cfg.Host, cfg.QPS, cfg.Burst, cfg.UserAgent)
	}
	// The defaults are the documented ones.
	var d Flags
	d.Register(flag.NewFlagSet("d", flag.ContinueOnError), Usage{})
	if d.QPS != DefaultQPS || d.Burst != DefaultBurst || d.LogFormat != "text" || d.LogLevel != "info" {
		t.Errorf("defaults %+v", d)
	}
}
