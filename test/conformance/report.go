package conformance

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Spec is one in-scope spec's outcome.
type Spec struct {
	Name     string        `json:"name"`
	Group    string        `json:"group"`
	Result   string        `json:"result"` // passed, failed, skipped, not run
	Reason   string        `json:"reason,omitempty"`
	Duration time.Duration `json:"duration"`
}

// junitSuites is the part of ginkgo's JUnit report the report reads.
type junitSuites struct {
	Suites []struct {
		Cases []struct {
			Name    string  `xml:"name,attr"`
			Status  string  `xml:"status,attr"`
			Time    float64 `xml:"time,attr"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Body    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

var groupOf = regexp.MustCompile(groups)

// readJUnit returns the specs of ginkgo's JUnit report whose name matches
// scope, in the report's order. ginkgo lists every spec of the suite,
// those outside the run's focus, and those a suite timeout kept from
// running, as skipped without a message.
func readJUnit(path, scope string) ([]Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var j junitSuites
	if err := xml.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	in := regexp.MustCompile(scope)
	var specs []Spec
	for _, s := range j.Suites {
		for _, c := range s.Cases {
			name := strings.TrimPrefix(c.Name, "[It] ")
			if !in.MatchString(name) {
				continue
			}
			sp := Spec{Name: name, Result: c.Status, Duration: time.Duration(c.Time * float64(time.Second))}
			if m := groupOf.FindStringSubmatch(name); m != nil {
				sp.Group = m[2]
			}
			switch {
			case c.Status == "interrupted" || c.Failure != nil && strings.HasPrefix(c.Failure.Body, "[TIMEDOUT] A suite timeout occurred"):
				sp.Result, sp.Reason = "not run", "interrupted by the suite's timeout"
			case c.Failure != nil:
				sp.Result, sp.Reason = "failed", firstLine(c.Failure.Message, c.Failure.Body)
			case c.Error != nil:
				sp.Result, sp.Reason = "failed", firstLine(c.Error.Message)
			case c.Status == "skipped" && (c.Skipped == nil || c.Skipped.Message == "" || c.Skipped.Message == "skipped"):
				sp.Result = "not run"
			case c.Status == "skipped" || c.Status == "pending":
				sp.Result, sp.Reason = "skipped", firstLine(c.Skipped.Message)
			}
			specs = append(specs, sp)
		}
	}
	return specs, nil
}

// markSkipped reports the specs our skip list kept from running (ginkgo
// lists them like the specs outside the focus) as skipped, with the
// list's reason.
func markSkipped(specs []Spec, skips map[string]string) {
	for i, s := range specs {
		for pattern, why := range skips {
			if s.Result == "not run" && regexp.MustCompile(pattern).MatchString(s.Name) {
				specs[i].Result, specs[i].Reason = "skipped", "skip list: "+why
			}
		}
	}
}

// firstLine is the first non-empty line of the first non-empty text, cut
// to a table cell's length.
func firstLine(texts ...string) string {
	for _, t := range texts {
		for _, l := range strings.Split(t, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				l = strings.ReplaceAll(l, "|", `\|`)
				if len(l) > 240 {
					l = l[:240] + "…"
				}
				return l
			}
		}
	}
	return ""
}

// report is what a run found.
type report struct {
	Focus   string            `json:"focus"`
	Wall    time.Duration     `json:"wall"`
	Machine string            `json:"machine"`
	Skips   map[string]string `json:"skips"`
	Specs   []Spec            `json:"specs"`
}

func (r report) count(result string) int {
	n := 0
	for _, s := range r.Specs {
		if s.Result == result {
			n++
		}
	}
	return n
}

func (r report) totals() string {
	return fmt.Sprintf("%d in scope: %d passed, %d failed, %d skipped, %d not run", len(r.Specs),
		r.count("passed"), r.count("failed"), r.count("skipped"), r.count("not run"))
}

// write puts report.md, report.json and junit.xml (the in-scope specs
// alone: the suite's own lists all of its thousands) in dir.
func (r report) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "junit.xml"), r.junit(), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "report.md"))
	if err != nil {
		return err
	}
	r.markdown(f)
	return f.Close()
}

// junit is the in-scope specs as a JUnit file: a failure's message is its
// first line, a skip's its reason; specs not run are left out.
func (r report) junit() []byte {
	type result struct {
		Message string `xml:"message,attr"`
	}
	type testcase struct {
		Name    string  `xml:"name,attr"`
		Time    float64 `xml:"time,attr"`
		Failure *result `xml:"failure,omitempty"`
		Skipped *result `xml:"skipped,omitempty"`
	}
	type testsuite struct {
		XMLName  xml.Name   `xml:"testsuite"`
		Name     string     `xml:"name,attr"`
		Tests    int        `xml:"tests,attr"`
		Failures int        `xml:"failures,attr"`
		Skipped  int        `xml:"skipped,attr"`
		Time     float64    `xml:"time,attr"`
		Cases    []testcase `xml:"testcase"`
	}
	ts := testsuite{Name: "Kubernetes conformance through a leaf", Failures: r.count("failed"), Skipped: r.count("skipped"), Time: r.Wall.Seconds()}
	for _, s := range r.Specs {
		c := testcase{Name: s.Name, Time: s.Duration.Seconds()}
		switch s.Result {
		case "not run":
			continue
		case "failed":
			c.Failure = &result{s.Reason}
		case "skipped":
			c.Skipped = &result{s.Reason}
		}
		ts.Cases = append(ts.Cases, c)
	}
	ts.Tests = len(ts.Cases)
	b, _ := xml.MarshalIndent(ts, "", "  ") // plain structs: cannot fail
	return append([]byte(xml.Header), append(b, '\n')...)
}

func (r report) markdown(w io.Writer) {
	fmt.Fprintf(w, "# Conformance through a leaf\n\n")
	fmt.Fprintf(w, "- **%s**\n- wall time of the suite: %s\n- machine: %s\n- focus: `%s`\n- JUnit: [junit.xml](junit.xml)\n\n",
		r.totals(), r.Wall.Round(time.Second), r.Machine, r.Focus)
	groups := map[string][]Spec{}
	var order []string
	for _, s := range r.Specs {
		if _, ok := groups[s.Group]; !ok {
			order = append(order, s.Group)
		}
		groups[s.Group] = append(groups[s.Group], s)
	}
	slices.Sort(order)
	fmt.Fprintf(w, "| group | passed | failed | skipped | not run |\n|---|---|---|---|---|\n")
	for _, g := range order {
		sub := report{Specs: groups[g]}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d |\n", g, sub.count("passed"), sub.count("failed"), sub.count("skipped"), sub.count("not run"))
	}
	for _, g := range order {
		fmt.Fprintf(w, "\n## %s\n\n| spec | result | s | reason |\n|---|---|---|---|\n", g)
		for _, s := range groups[g] {
			fmt.Fprintf(w, "| %s | %s | %.0f | %s |\n", strings.ReplaceAll(s.Name, "|", `\|`), s.Result, s.Duration.Seconds(), s.Reason)
		}
	}
}
