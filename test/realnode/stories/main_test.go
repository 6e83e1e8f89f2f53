// Package stories runs the product's stories on a real node: the chart
// installed with helm, Glance pods built from Debian's packages serving
// uploads into an S3 store, a real MariaDB behind them, and clients in
// pods going through the Services the operator renders.
package stories

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/test/controlplane"
	"github.com/c5c3/glance-operator/test/debianroot"
	"github.com/c5c3/glance-operator/test/realnode"
)

var (
	env *realnode.Env
	// cl is a cluster-admin client that knows the product's kinds.
	cl client.Client
	// sceneImages are the stand-ins', MariaDB's and Glance's images.
	sceneImages realnode.SceneImages
	// installed is how long helm install took until both Deployments
	// were available; installStarted is when it began.
	installed      time.Duration
	installStarted time.Time
)

// glanceReleases are the releases the Glance image is tagged for: one
// per launch mode (2025.2 runs eventlet, 2026.1 uWSGI).
var glanceReleases = []string{"2025.2", "2026.1"}

// sidRelease tags the Glance image of Debian sid's packages (Glance 33):
// the release after glanceReleases, for the schema migration story.
const sidRelease = "2026.2"

var keep = flag.Bool("stories.keep", false, "leave the cluster's directory (logs, kubeconfigs) behind after the suite")

func TestMain(m *testing.M) {
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// The other real-node suite of `go test ./...` may hold the machine:
	// waiting for it counts here.
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	unlock, err := controlplane.LockSuite(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	defer unlock()
	dir, err := os.MkdirTemp("", "glst-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	if env, err = realnode.Start(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	fmt.Printf("real-node cluster up in %s (logs in %s)\n", env.Startup.Round(100*time.Millisecond), filepath.Join(dir, "logs"))
	code := func() int {
		stop, err := setUp(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "FAIL:", err)
			return 1
		}
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintln(os.Stderr, "FAIL:", err)
			}
		}()
		return m.Run()
	}()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: stop the real-node cluster:", err)
		code = 1
	}
	if left, err := controlplane.HostLeftovers(dir); err != nil || len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the stopped node left behind (%v):\n  %s\n", err, strings.Join(left, "\n  "))
		code = 1
	}
	if !*keep {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: remove", dir, err)
			code = 1
		}
	}
	return code
}

// setUp pushes the stories' images, installs the chart and starts the
// MariaDB stand-in; stop stops the stand-in.
func setUp(ctx context.Context) (stop func() error, err error) {
	scheme, err := operator.NewScheme()
	if err != nil {
		return nil, err
	}
	if cl, err = client.New(env.Cluster.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	start := time.Now()
	if sceneImages, err = env.PushSceneImages(ctx, debianroot.Glance, glanceReleases); err != nil {
		return nil, err
	}
	fmt.Printf("stand-in, MariaDB and Glance images built and pushed in %s\n", time.Since(start).Round(100*time.Millisecond))
	start = time.Now()
	if _, err := env.PushGlanceImage(ctx, debianroot.GlanceSid, []string{sidRelease}); err != nil {
		return nil, err
	}
	fmt.Printf("Glance image of Debian sid built and pushed as %s in %s\n", sidRelease, time.Since(start).Round(100*time.Millisecond))
	installStarted = time.Now()
	if installed, err = env.InstallChart(ctx); err != nil {
		return nil, err
	}
	if err := realnode.CreateSecretStore(ctx, cl); err != nil {
		return nil, err
	}
	return realnode.StartMariaDBOperator(ctx, env.Cluster.Config, sceneImages.MariaDB, filepath.Join(env.Cluster.Dir, "logs"))
}
