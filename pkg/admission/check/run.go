package check

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit statuses of Run.
const (
	ExitAllowed = 0 // every object allowed
	ExitDenied  = 1 // at least one denial (or warning, with --warnings-as-errors)
	ExitUsage   = 2 // bad flags or unreadable input
)

const usage = `Usage: glance-webhook check -f FILE|DIR [-f ...] [--old FILE] [-o text|json|junit] [--warnings-as-errors]

Judges Glance and GlanceBackend manifests offline with the verdict the cluster
gives: the CRD's defaults and schema (CEL included) and the admission webhooks,
in the API server's order. Cross-object rules (one default backend per Glance,
PriorityClass existence) are judged against the other objects of the input.
An object that also appears in --old (same kind, namespace and name) is judged
as an update of it; include the old status to judge release upgrades.

Exit status: 0 when everything is allowed, 1 on any denial (or warning with
--warnings-as-errors), 2 on bad usage or unreadable input.

Flags:
`

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// Run runs `glance-webhook check` with args (without the subcommand name).
func Run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var files, olds stringList
	fs.Var(&files, "f", "manifest file or directory (repeatable)")
	fs.Var(&olds, "old", "file with the stored objects the inputs update (repeatable)")
	output := fs.String("o", "text", "output format: text, json or junit")
	warningsAsErrors := fs.Bool("warnings-as-errors", false, "fail on admission warnings too")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if len(files) == 0 || fs.NArg() > 0 {
		fs.Usage()
		return ExitUsage
	}
	write, ok := map[string]func(io.Writer, []Result) error{
		"text":  WriteText,
		"json":  WriteJSON,
		"junit": func(w io.Writer, r []Result) error { return WriteJUnit(w, r, *warningsAsErrors) },
	}[*output]
	if !ok {
		fmt.Fprintf(stderr, "check: unknown output format %q: want text, json or junit\n", *output)
		return ExitUsage
	}

	docs, err := ReadDocuments(files...)
	if err != nil {
		fmt.Fprintln(stderr, "check:", err)
		return ExitUsage
	}
	oldDocs, err := ReadDocuments(olds...)
	if err != nil {
		fmt.Fprintln(stderr, "check: --old:", err)
		return ExitUsage
	}
	ev, err := NewEvaluator()
	if err != nil {
		fmt.Fprintln(stderr, "check:", err)
		return ExitUsage
	}
	results := ev.Evaluate(context.Background(), docs, oldDocs)
	if err := write(stdout, results); err != nil {
		fmt.Fprintln(stderr, "check:", err)
		return ExitUsage
	}
	for _, r := range results {
		if !r.Allowed || (*warningsAsErrors && len(r.Warnings) > 0) {
			return ExitDenied
		}
	}
	return ExitAllowed
}
