// Package dashboard generates leafsync's Grafana dashboard,
// charts/leafsync/files/dashboard.json, from the metric Specs of
// internal/syncer/metrics with the Grafana Foundation SDK. Run
// `go test ./internal/syncer/metrics/dashboard -update` to rewrite the file; the
// test fails while the committed file differs from what JSON returns.
//
// Every query is written from a Spec (see promql.go): renaming a metric or
// a label changes the dashboard with it, and using a label a metric does
// not have fails the generator.
//
// The package is a generator only: the leafsync binary does not import it,
// so the SDK stays out of the binary.
package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/metrics"
)

// UID and Title of the dashboard; the chart names its ConfigMap key after
// the UID.
const (
	UID   = "leafsync-flap-suppression"
	Title = "leafsync — flap suppression"
)

// JSON renders the dashboard as Grafana imports it: indented, with a
// trailing newline.
func JSON() ([]byte, error) {
	d, err := build()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Every panel and query reads the data source chosen in the datasource
// variable.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

func build() (dashboard.Dashboard, error) {
	b := dashboard.NewDashboardBuilder(Title).
		Uid(UID).
		Description("What leafsync absorbed: flaps that did not become NotReady leaves, evictions it refused to forward, and the health of every member link.").
		Tags([]string{"leafsync", "multicluster"}).
		Timezone("browser").
		Version(1).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Refresh("30s").
		Time("now-6h", "now").
		Annotation(dashboard.NewAnnotationQueryBuilder().
			Name("Annotations & Alerts").
			Datasource(common.DataSourceRef{Type: cog.ToPtr("grafana"), Uid: cog.ToPtr("-- Grafana --")}).
			Type("dashboard").
			BuiltIn(1).
			Enable(true).
			Hide(true).
			IconColor("rgba(0, 211, 255, 1)")).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").
			Label("Data source").
			Type("prometheus").
			Hide(dashboard.VariableHideDontHide)).
		WithVariable(clusterVariable())

	// Panels are laid out by the builder, left to right, a new line when
	// the 24 columns are full; each row starts a new line.
	b.WithRow(dashboard.NewRowBuilder("Fleet overview"))
	ready, suspect := hysteresis.Ready.String(), hysteresis.Suspect.String()
	down := []string{hysteresis.NotReady.String(), hysteresis.Recovering.String()}
	b.WithPanel(statPanel("Members Ready", "Members whose leaf is Ready.", "green",
		"sum("+sel(metrics.MemberState, eq("state", ready))+")"))
	b.WithPanel(statPanel("Suspect (flap tolerated)", "Members failing probes but not yet NotReady: their leaves stay Ready.", "yellow",
		"sum("+sel(metrics.MemberState, eq("state", suspect))+")"))
	b.WithPanel(statPanel("NotReady", "Members confirmed down.", "red",
		"sum("+sel(metrics.MemberState, oneOf("state", down...))+")"))
	b.WithPanel(statPanel("Flaps absorbed (24h)", "Failures that ended before notReadyAfter: each one would have been a NotReady leaf or evicted pods without leafsync.", "blue",
		"sum(increase("+counter(metrics.FlapsSuppressed)+"[24h]))"))
	b.WithPanel(statPanel("Stale evictions kept (24h)", "Host eviction deletes that leafsync did not forward downstream (stale, deferred or retained) or owed until the member returned.", "purple",
		"sum(increase("+counter(metrics.PodDeletes, oneOf("outcome", known(metrics.DeleteOutcomes, "stale_deferred", "stale_retained", "owed")...))+"[24h]))"))
	b.WithPanel(statPanel("Mass-disconnect guard", "1 while so many members fail at once that leafsync holds them out of NotReady: each for at most massHoldMax (default 5m), then one per massReleaseInterval (default 10s).", "orange",
		"max("+sel(metrics.MassDisconnect)+")"))

	b.WithRow(dashboard.NewRowBuilder("Readiness per cluster"))
	b.WithPanel(memberStatePanel())
	b.WithPanel(timeline("Cordoned", "1 while the leaf carries the leafsync.io/unreachable:NoSchedule cordon (new pods stay away; running pods untouched).",
		sel(metrics.MemberCordoned, inClusters),
		valueMap{"0": {"open", "green"}, "1": {"cordoned", "orange"}}))
	b.WithPanel(graph("Flap penalty", "Flap-damping penalty per member; above suppress the leaf is cordoned until the penalty decays below reuse.", 6, 12,
		target(sel(metrics.FlapPenalty, inClusters), "{{cluster}}")))
	b.WithPanel(graph("Flaps absorbed per hour", "Failures that ended before notReadyAfter, per member.", 6, 12,
		target("increase("+counter(metrics.FlapsSuppressed, inClusters)+"[1h])", "{{cluster}}")))
	b.WithPanel(graph("Probe results", "Probes of member API servers per second, by result.", 6, 12,
		target("sum by (cluster, result) (rate("+counter(metrics.ProbeResults, inClusters)+"[5m]))", "{{cluster}} {{result}}"),
		target(p99(metrics.ProbeDuration), "{{cluster}} p99 latency")))

	b.WithRow(dashboard.NewRowBuilder("Circuit breakers"))
	// Values as metrics.BreakerState documents them.
	b.WithPanel(timeline("Breaker state", "Per-member circuit breaker: closed, half-open (one trial call), open (calls fail fast).",
		sel(metrics.BreakerState, inClusters),
		valueMap{"0": {"closed", "green"}, "1": {"half-open", "yellow"}, "2": {"open", "red"}}))
	b.WithPanel(graph("Calls failed fast", "Calls to members rejected by an open breaker, per second.", 6, 12,
		target("rate("+counter(metrics.BreakerRejected, inClusters)+"[5m])", "{{cluster}}")))

	b.WithRow(dashboard.NewRowBuilder("Pods"))
	b.WithPanel(graph("Host deletes by outcome", "What leafsync did with host deletions of synced pods: forwarded, deferred or retained as stale, owed, adopted, reaped.", 7, 12,
		target("sum by (outcome) (increase("+counter(metrics.PodDeletes, inClusters)+"[1h]))", "{{outcome}}")).
		DrawStyle(common.GraphDrawStyleBars).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)))
	b.WithPanel(graph("Pending downstream deletes", "Deletes leafsync owes (member was down), defers (until the replacement is Ready) or retains.", 7, 12,
		target("sum by (cluster, kind) ("+sel(metrics.OwedDeletes, inClusters)+")", "{{cluster}} {{kind}}")))
	b.WithPanel(graph("Synced pods", "Host pods on each leaf that leafsync keeps in the member.", 6, 12,
		target(sel(metrics.SyncedPods, inClusters), "{{cluster}}")))
	b.WithPanel(graph("Pod sync latency (p99)", metrics.PodSyncDuration.Help, 6, 12,
		target(p99(metrics.PodSyncDuration), "{{cluster}}")).
		Unit("s"))

	b.WithRow(dashboard.NewRowBuilder("Heartbeat and state"))
	b.WithPanel(graph("Lease renewal lag (p99)", "How late leaf Lease renewals land. Near KCM's node-monitor-grace-period (50s by default) a leaf is about to be marked Unknown.", 6, 12,
		target(p99(metrics.LeaseRenewalLag), "{{cluster}}"),
		target("sum by (cluster) (increase("+counter(metrics.LeaseRenewalFailures, inClusters)+"[5m]))", "{{cluster}} failed rounds")).
		Unit("s"))
	b.WithPanel(graph("Leaf writes", "Writes of leaf Node objects per minute; steady growth without member changes is a write storm.", 6, 12,
		target("sum by (cluster) (rate("+counter(metrics.LeafWrites, inClusters)+"[5m])) * 60", "{{cluster}}")))
	b.WithPanel(graph("State store", "Pending state writes and write errors (state stays in memory while the store is down).", 6, 12,
		target(sel(metrics.StorePendingWrites), "pending"),
		target("sum by (backend, reason) (rate("+counter(metrics.StoreWriteErrors)+"[5m]))", "errors {{backend}} {{reason}}")))
	b.WithPanel(graph("Leaf allocatable CPU", "CPU cores each leaf offers the host scheduler (the member's aggregated free allocatable).", 6, 12,
		target(sel(metrics.LeafAllocatable, inClusters, eq("resource", "cpu")), "{{cluster}}")))

	b.WithRow(dashboard.NewRowBuilder("Eviction guard"))
	b.WithPanel(graph("Evictions refused and completed (eviction guard)", "Refused: the taint manager tried to evict a leaf's pods while leafsync saw the member healthy (its Lease had lapsed) and the guard refused. Completed: evictions leafsync carried out itself once the member was confirmed NotReady, where the taint manager had given up.", 6, 16,
		target("sum by (cluster) (increase("+counter(metrics.EvictionsRefused, inClusters)+"[5m]))", "refused {{cluster}}"),
		target("sum by (cluster) (increase("+counter(metrics.EvictionsCompleted, inClusters)+"[5m]))", "completed {{cluster}}")))
	b.WithPanel(statPanel("Eviction guard active", "1: the ValidatingAdmissionPolicy is installed and leafsync keeps its readiness records. 0: disabled, or leafsync could not install it (its log says why).", "orange",
		"max("+sel(metrics.EvictionGuardActive)+")").
		Height(6).Span(8))

	b.WithRow(dashboard.NewRowBuilder("Verification"))
	b.WithPanel(timeline("Verified", "1 while a member is verified to run new pods; 0 while its leaf carries leafsync.io/unverified:NoSchedule (new pods stay away; running pods untouched).",
		sel(metrics.MemberVerified, inClusters),
		valueMap{"0": {"unverified", "orange"}, "1": {"verified", "green"}}))
	b.WithPanel(graph("Verification runs and failed checks", "Verification runs per hour by result, and failed checks per hour by check (rights, capacity, canary).", 6, 12,
		target("sum by (result) (increase("+counter(metrics.Verifications, inClusters)+"[1h]))", "{{result}}"),
		target("sum by (check) (increase("+counter(metrics.VerificationFailedChecks, inClusters)+"[1h]))", "failed {{check}}")))
	b.WithPanel(graph("Verification duration (p99)", metrics.VerificationDuration.Help, 6, 12,
		target(p99(metrics.VerificationDuration), "{{cluster}}")).
		Unit("s"))

	b.WithRow(dashboard.NewRowBuilder("Kubelet API"))
	b.WithPanel(graph("kubectl logs, exec, attach, port-forward on leaves", "Requests to the leaves' kubelet API per second, by verb and answer: upgraded (a stream handed to the member), 200, or the refusal (401, 403, 404, 502 when the member is unreachable).", 6, 24,
		target("sum by (verb, code) (rate("+counter(metrics.KubeletAPIRequests)+"[5m]))", "{{verb}} {{code}}")))

	b.WithRow(dashboard.NewRowBuilder("Shards"))
	b.WithPanel(graph("Members per replica", "Members each replica acts on (with more than one replica; docs/install.md, \"Running more than one replica\").", 6, 12,
		target(sumBy(metrics.ShardMembers, "replica", sel(metrics.ShardMembers)), "{{replica}}")).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)))
	b.WithPanel(graph("Assigned and acting", "Members assigned to the replicas and members a replica acts on, summed over the replicas. Acting below assigned for long: a member without an owner (alert LeafsyncMemberWithoutOwner).", 6, 12,
		target("sum("+sel(metrics.ShardAssignedMembers)+")", "assigned"),
		target("sum("+sel(metrics.ShardMembers)+")", "acting")))
	b.WithPanel(graph("Live replicas and shard Leases held", "Live replicas in the fewest and the most any replica sees (they differ while a replica joins, drains or is lost), and the replicas that hold their shard Lease.", 6, 12,
		target("min("+sel(metrics.ShardLiveReplicas)+")", "live (fewest seen)"),
		target("max("+sel(metrics.ShardLiveReplicas)+")", "live (most seen)"),
		target("sum("+sel(metrics.ShardLeaseHeld)+")", "shard Leases held")))
	b.WithPanel(graph("Handovers", "Members taken per 5 minutes, by reason: new (no writer yet), rebalance (from a live replica, make before break), failover (from a replica whose shard Lease expired).", 6, 12,
		target(sumBy(metrics.ShardHandovers, "reason", "increase("+counter(metrics.ShardHandovers)+"[5m])"), "{{reason}}")).
		DrawStyle(common.GraphDrawStyleBars).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)))

	d, err := b.Build()
	if err != nil {
		return d, err
	}
	// The SDK's datasource variable has no refresh setting; Grafana
	// refreshes the list of data sources when the dashboard loads.
	d.Templating.List[0].Refresh = cog.ToPtr(dashboard.VariableRefreshOnDashboardLoad)
	// Panel ids in order of appearance; the SDK leaves them to the caller.
	for i, p := range d.Panels {
		id := uint32(i + 1)
		switch {
		case p.Panel != nil:
			p.Panel.Id = &id
		case p.RowPanel != nil:
			p.RowPanel.Id = id
		default:
			return d, fmt.Errorf("dashboard: panel %d is neither a panel nor a row", i)
		}
	}
	return d, nil
}

// clusterVariable chooses members by the cluster label of the readiness
// metric, which every registered member has from its registration on.
func clusterVariable() *dashboard.QueryVariableBuilder {
	q := labelValues(metrics.MemberState, "cluster")
	return dashboard.NewQueryVariableBuilder("cluster").
		Label("Member cluster").
		Datasource(datasource).
		Query(dashboard.StringOrMap{Map: map[string]any{"query": q, "refId": "cluster"}}).
		Definition(q).
		Multi(true).
		IncludeAll(true).
		AllValue(".*").
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).
		Hide(dashboard.VariableHideDontHide)
}

// target is one query of the data source variable; refIDs names it.
func target(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Datasource(datasource).Expr(expr).LegendFormat(legend)
}

// refIDs names a panel's queries A, B, … in order.
func refIDs(targets []*prometheus.DataqueryBuilder) []cog.Builder[variants.Dataquery] {
	out := make([]cog.Builder[variants.Dataquery], len(targets))
	for i, t := range targets {
		out[i] = t.RefId(string(rune('A' + i)))
	}
	return out
}

// statPanel is one big number, coloured as a whole, of an instant query.
func statPanel(title, description, color, expr string) *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Height(4).Span(4).
		Targets(refIDs([]*prometheus.DataqueryBuilder{target(expr, "").Instant()})).
		Unit("none").
		ColorScheme(dashboard.NewFieldColorBuilder().Mode(dashboard.FieldColorModeIdFixed).FixedColor(color)).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Fields("").Values(false)).
		ColorMode(common.BigValueColorModeBackground).
		GraphMode(common.BigValueGraphModeNone).
		TextMode(common.BigValueTextModeValue).
		// The SDK writes "" unless told; Grafana's default.
		Orientation(common.VizOrientationAuto)
}

// graph is a time series panel of h rows and w columns.
func graph(title, description string, h, w uint32, targets ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Height(h).Span(w).
		Targets(refIDs(targets))
}

// valueMap maps values to a text and a colour.
type valueMap map[string]struct{ text, color string }

func mappings(m valueMap) []dashboard.ValueMapping {
	opts := map[string]dashboard.ValueMappingResult{}
	for v, r := range m {
		opts[v] = dashboard.ValueMappingResult{Text: cog.ToPtr(r.text), Color: cog.ToPtr(r.color)}
	}
	return []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText, Options: opts}}}
}

// timeline is a half-width state timeline of one query per member, its
// values named by m.
func timeline(title, description, expr string, m valueMap) *statetimeline.PanelBuilder {
	return statetimeline.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource).
		Height(6).Span(12).
		Targets(refIDs([]*prometheus.DataqueryBuilder{target(expr, "{{cluster}}")})).
		Mappings(mappings(m)).
		ShowValue(common.VisibilityModeNever).
		MergeValues(true).
		// The SDK writes a hidden legend and an empty tooltip mode unless
		// told; these are Grafana's defaults, as the panel had them.
		Legend(common.NewVizLegendOptionsBuilder().
			ShowLegend(true).
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom)).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeSingle).Sort(common.SortOrderNone))
}

// stateColors are the colours of the readiness states, by State.
var stateColors = [hysteresis.NumStates]string{
	hysteresis.Ready:      "green",
	hysteresis.Suspect:    "yellow",
	hysteresis.NotReady:   "red",
	hysteresis.Recovering: "blue",
}

// memberStatePanel shows the one-hot leafsync_member_state as one value
// per member, the State's number: each state's series times its number,
// the largest wins, and Ready (0) is what remains when none of the others
// is 1.
func memberStatePanel() *statetimeline.PanelBuilder {
	expr := ""
	m := valueMap{}
	for st := hysteresis.State(0); st < hysteresis.NumStates; st++ {
		m[fmt.Sprint(int(st))] = struct{ text, color string }{st.String(), stateColors[st]}
		if st == hysteresis.Ready {
			continue
		}
		if expr != "" {
			expr += " or "
		}
		expr += fmt.Sprintf("(%s * %d)", sel(metrics.MemberState, inClusters, eq("state", st.String())), int(st))
	}
	return timeline("Member state", "The readiness decision per member: Ready, Suspect (failing, tolerated), NotReady (confirmed down), Recovering.",
		"max by (cluster) ("+expr+")", m).
		Height(7).Span(24).
		ColorScheme(dashboard.NewFieldColorBuilder().Mode(dashboard.FieldColorModeIdThresholds)).
		Thresholds(dashboard.NewThresholdsConfigBuilder().
			Mode(dashboard.ThresholdsModeAbsolute).
			Steps([]dashboard.Threshold{{Value: nil, Color: "green"}})).
		RowHeight(0.8)
}
