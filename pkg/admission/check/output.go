package check

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// Report is the JSON form of a run.
type Report struct {
	Results []Result `json:"results"`
}

// WriteText writes one line per object and one indented line per error and
// warning, the way kubectl shows them.
func WriteText(w io.Writer, results []Result) error {
	var b strings.Builder
	denied := 0
	for _, r := range results {
		verdict := "allowed"
		if !r.Allowed {
			verdict = "denied"
			denied++
		}
		fmt.Fprintf(&b, "%s: %s %s/%s %s\n", r.Source, r.Kind, r.Namespace, r.Name, verdict)
		for _, e := range r.Errors {
			fmt.Fprintf(&b, "  error: %s\n", e)
		}
		for _, wn := range r.Warnings {
			fmt.Fprintf(&b, "  Warning: %s\n", wn)
		}
	}
	fmt.Fprintf(&b, "%d object(s) checked, %d denied\n", len(results), denied)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the Report.
func WriteJSON(w io.Writer, results []Result) error {
	if results == nil {
		results = []Result{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(Report{Results: results})
}

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Body    string `xml:",chardata"`
}

// WriteJUnit writes a JUnit report: one test case per object, failed when
// denied (or, with warningsAsErrors, when warned), warnings in system-out.
func WriteJUnit(w io.Writer, results []Result, warningsAsErrors bool) error {
	suite := junitSuite{Name: "glance-webhook check", Tests: len(results)}
	for _, r := range results {
		c := junitCase{Name: fmt.Sprintf("%s %s/%s", r.Kind, r.Namespace, r.Name), ClassName: r.Source}
		if len(r.Warnings) > 0 {
			c.SystemOut = "Warning: " + strings.Join(r.Warnings, "\nWarning: ")
		}
		switch {
		case !r.Allowed:
			c.Failure = &junitFailure{Message: "denied", Type: "Denied", Body: strings.Join(r.Errors, "\n")}
		case warningsAsErrors && len(r.Warnings) > 0:
			c.Failure = &junitFailure{Message: "warnings treated as errors", Type: "Warning", Body: strings.Join(r.Warnings, "\n")}
		}
		if c.Failure != nil {
			suite.Failures++
		}
		suite.Cases = append(suite.Cases, c)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSuite{suite}}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
