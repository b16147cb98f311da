package dashboard

import (
	"fmt"
	"slices"
	"strings"

	"github.com/leafsync/leafsync/internal/syncer/metrics"
)

// The PromQL of the panels is written from the metric Specs, never from
// bare names: a renamed metric or label, or a counter used as a gauge,
// fails the generator (and so the staleness test), not the dashboard.

// matcher is one label matcher of a selector.
type matcher struct{ label, op, value string }

func eq(label, value string) matcher { return matcher{label, "=", value} }

// oneOf matches any of values.
func oneOf(label string, values ...string) matcher {
	return matcher{label, "=~", strings.Join(values, "|")}
}

// inClusters matches the members chosen in the dashboard's cluster variable.
var inClusters = matcher{"cluster", "=~", "$cluster"}

// sel is the selector of s's series with the matchers.
func sel(s metrics.Spec, ms ...matcher) string {
	return series(s, s.Name, ms)
}

// bucket is the selector of a histogram's _bucket series.
func bucket(s metrics.Spec, ms ...matcher) string {
	if s.Kind != metrics.Histogram {
		panic(fmt.Sprintf("dashboard: %s is a %s, not a histogram", s.Name, s.Kind))
	}
	return series(s, s.Name+"_bucket", ms)
}

// counter is the selector of a counter, the only kind rate() and
// increase() may read.
func counter(s metrics.Spec, ms ...matcher) string {
	if s.Kind != metrics.Counter {
		panic(fmt.Sprintf("dashboard: %s is a %s, not a counter", s.Name, s.Kind))
	}
	return sel(s, ms...)
}

func series(s metrics.Spec, name string, ms []matcher) string {
	if len(ms) == 0 {
		return name
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		if !slices.Contains(s.Labels, m.label) {
			panic(fmt.Sprintf("dashboard: %s has no label %q (labels %v)", s.Name, m.label, s.Labels))
		}
		parts[i] = fmt.Sprintf("%s%s%q", m.label, m.op, m.value)
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// sumBy sums expr, a query of s, by one of s's labels.
func sumBy(s metrics.Spec, label, expr string) string {
	if !slices.Contains(s.Labels, label) {
		panic(fmt.Sprintf("dashboard: %s has no label %q (labels %v)", s.Name, label, s.Labels))
	}
	return fmt.Sprintf("sum by (%s) (%s)", label, expr)
}

// p99 is the 99th percentile per member of a histogram over 5m.
func p99(s metrics.Spec) string {
	return fmt.Sprintf("histogram_quantile(0.99, sum by (cluster, le) (rate(%s[5m])))", bucket(s, inClusters))
}

// known returns values after checking that each is one of the label values
// leafsync exports.
func known(all []string, values ...string) []string {
	for _, v := range values {
		if !slices.Contains(all, v) {
			panic(fmt.Sprintf("dashboard: label value %q is not one of %v", v, all))
		}
	}
	return values
}

// labelValues is the variable query for the values of one of s's labels.
func labelValues(s metrics.Spec, label string) string {
	if !slices.Contains(s.Labels, label) {
		panic(fmt.Sprintf("dashboard: %s has no label %q (labels %v)", s.Name, label, s.Labels))
	}
	return fmt.Sprintf("label_values(%s, %s)", s.Name, label)
}
