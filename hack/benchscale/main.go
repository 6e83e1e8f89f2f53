// Command benchscale runs `make bench-scale`: the operator on the local
// cluster at each count of Glances in -n, and the report in -out.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/c5c3/glance-operator/pkg/startup"
	"github.com/c5c3/glance-operator/test/benchscale"
)

func main() {
	fs := flag.NewFlagSet("benchscale", flag.ContinueOnError)
	counts := fs.String("n", "1,100,1000", "comma-separated counts of Glances, each on a fresh cluster")
	out := fs.String("out", ".run/bench-scale", "directory of the report and the clusters' state")
	idle := fs.Duration("idle", time.Minute, "how long to watch the manager at rest once all are Ready")
	unrelated := fs.Int("unrelated-secrets", 10000, "2 KiB Secrets no Glance reads, created after the idle period")
	timeout := fs.Duration("timeout", 30*time.Minute, "bound of each count's wait for all Ready")
	floor := fs.Bool("floor", true, "measure each count's control-plane floor first: the same workloads applied directly, with no operator")
	managerArgs := fs.String("manager-args", "", "extra glance-operator flags, space-separated, to compare settings")
	if code, ok := startup.Parse(fs, os.Args[1:]); !ok {
		os.Exit(code)
	}
	var o benchscale.Options
	for _, c := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchscale: -n %q: %v\n", *counts, err)
			os.Exit(2)
		}
		o.Counts = append(o.Counts, n)
	}
	o.ManagerArgs = strings.Fields(*managerArgs)
	o.Dir, o.Idle, o.UnrelatedSecrets, o.Timeout, o.Floor, o.Progress = *out, *idle, *unrelated, *timeout, *floor, os.Stdout
	report, err := benchscale.Run(ctrl.SetupSignalHandler(), o)
	if report != nil {
		if werr := report.Write(o.Dir); werr != nil {
			fmt.Fprintln(os.Stderr, "benchscale: write the report:", werr)
			os.Exit(1)
		}
		fmt.Print(report.Markdown())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchscale:", err)
		os.Exit(1)
	}
}
