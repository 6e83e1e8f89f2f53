// Package stories runs the product's stories on a real node: the chart
// installed with helm, Glance pods built from Debian's packages serving
// uploads into an S3 store, a real MariaDB behind them, and clients in
// pods going through the Services the operator renders.
package stories

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/c5c3/glance-operator/pkg/operator"
	"github.com/c5c3/glance-operator/test/debianroot"
	"github.com/c5c3/glance-operator/test/realnode"
)

var (
	env *realnode.Env
	// cl is a cluster-admin client that knows the product's kinds.
	cl client.WithWatch
	// sceneImages are the stand-ins', MariaDB's and Glance's images.
	sceneImages realnode.SceneImages
	// installed is how long helm install of the release the upgrade
	// starts from took until both Deployments were available;
	// installStarted is when it began.
	installed      time.Duration
	installStarted time.Time
)

// glanceReleases are the releases of the Glance images: one per launch
// mode (2025.2 runs eventlet, 2026.1 uWSGI).
var glanceReleases = []string{"2025.2", "2026.1"}

// sidRelease tags the Glance image of Debian sid's packages (Glance 33,
// uWSGI): the release after glanceReleases, for the schema migration story.
const sidRelease = "2026.2"

var keep = flag.Bool("stories.keep", false, "leave the cluster's directory (logs, kubeconfigs) behind after the suite")

func TestMain(m *testing.M) {
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	os.Exit(realnode.Suite{
		Prefix: "glst-",
		Keep:   *keep,
		SetUp:  setUp,
		AfterStop: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			return crashedRunCleansUp(ctx)
		},
	}.Run(m))
}

// setUp pushes the stories' images and, at the same time, releases the
// release the operator upgrade starts from and installs its chart; then it
// starts the MariaDB stand-in and runs the operator upgrade to the chart
// under test, which every test then runs on. stop stops the stand-in.
func setUp(ctx context.Context, e *realnode.Env) (stop func() error, err error) {
	env = e
	scheme, err := operator.NewScheme()
	if err != nil {
		return nil, err
	}
	if cl, err = client.NewWithWatch(env.Cluster.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	wg.Go(func() {
		start := time.Now()
		if sceneImages, errs[0] = env.PushSceneImages(ctx, debianroot.Glance, glanceReleases); errs[0] == nil {
			fmt.Printf("stand-in, MariaDB and Glance images built and pushed in %s\n", time.Since(start).Round(100*time.Millisecond))
		}
	})
	wg.Go(func() {
		start := time.Now()
		if _, errs[1] = env.PushGlanceImage(ctx, debianroot.GlanceSid, []string{sidRelease}); errs[1] == nil {
			fmt.Printf("Glance image of Debian sid built and pushed as %s in %s\n", sidRelease, time.Since(start).Round(100*time.Millisecond))
		}
	})
	wg.Go(func() {
		start := time.Now()
		previous, err := realnode.PublishPreviousRelease(ctx, env.Cluster.Registry, previousReleaseRef, filepath.Join(env.ImageDir(), "previous"))
		if err != nil {
			errs[2] = err
			return
		}
		upgrade = &operatorUpgrade{previous: previous, built: time.Since(start)}
		fmt.Printf("make release of %s, the release the upgrade starts from, in %s\n", previousReleaseRef[:12], upgrade.built.Round(100*time.Millisecond))
		installStarted = time.Now()
		if installed, errs[2] = env.InstallRelease(ctx, previous); errs[2] == nil {
			errs[2] = realnode.CreateSecretStore(ctx, cl)
		}
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if stop, err = realnode.StartMariaDBOperator(ctx, env.Cluster.Config, sceneImages.MariaDB, filepath.Join(env.Cluster.Dir, "logs")); err != nil {
		return nil, err
	}
	if err := upgrade.run(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("operator upgrade from %s: %w", previousReleaseRef[:12], err), stop())
	}
	return stop, nil
}
