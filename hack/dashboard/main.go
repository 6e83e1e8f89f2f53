// Command dashboard writes the operator's Grafana dashboard, built by
// pkg/dashboard, into the chart (`make manifests`).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/c5c3/glance-operator/pkg/dashboard"
)

func main() {
	out := flag.String("out", "charts/glance-operator/files/grafana-dashboard.json", "file to write")
	flag.Parse()
	data, err := dashboard.JSON()
	if err == nil {
		err = os.WriteFile(*out, data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}
