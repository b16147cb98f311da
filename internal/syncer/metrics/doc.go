package metrics

import (
	"fmt"
	"strings"
)

// markdown renders docs/metrics.md from allSpecs.
func markdown() string {
	var b strings.Builder
	b.WriteString("# leafsync metrics\n\n")
	b.WriteString("<!-- Generated from internal/syncer/metrics by `go test ./internal/syncer/metrics -update`; do not edit. -->\n\n")
	b.WriteString("All metrics are served on leafsync's metrics endpoint (`--metrics-bind-address`, default `:8080`, path `/metrics`). ")
	b.WriteString("Labels are bounded: cluster names, states, classes, causes and outcomes, never pod names.\n")
	group := ""
	for _, s := range allSpecs() {
		if s.Group != group {
			group = s.Group
			fmt.Fprintf(&b, "\n## %s\n\n| metric | type | labels | meaning |\n|---|---|---|---|\n", group)
		}
		labels := "—"
		if len(s.Labels) > 0 {
			labels = "`" + strings.Join(s.Labels, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", s.Name, s.Kind, labels, strings.ReplaceAll(s.Help, "|", "\\|"))
	}
	return b.String()
}
