// Package values is the Helm chart's values (charts/leafsync/values.yaml)
// as Go types. The chart's values.schema.json is generated from them and
// from leafsync's own config types (the chart's `config` is leafsync's
// config file), so that `helm install` refuses a wrong type or an unknown
// key with a message naming it, and the schema cannot drift from the code:
//
//	go test ./charts/values -update   # rewrites values.schema.json
//
// Kubernetes objects the chart passes through untouched (resources,
// affinity, volumes, …) are typed as plain objects: the API server
// validates them.
package values

import (
	"encoding/json"
	"reflect"

	"github.com/invopop/jsonschema"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/syncer/config"
)

// Object is a Kubernetes object or field the chart copies as it is.
type Object map[string]any

// Values are the chart's values.
type Values struct {
	// NameOverride replaces the chart's name in the names of its objects.
	NameOverride string `json:"nameOverride"`
	// FullnameOverride replaces the whole name of the chart's objects.
	FullnameOverride string `json:"fullnameOverride"`
	Image            Image  `json:"image"`
	// ImagePullSecrets are references ({name: …}) to Secrets of the release namespace.
	ImagePullSecrets []Object `json:"imagePullSecrets"`
	// ReplicaCount is the number of leafsync pods. More than one share the members (sharding), unless config.sharding.enabled is false: then one leads and the others stand by.
	ReplicaCount int `json:"replicaCount" jsonschema:"minimum=1"`
	// LogLevel of leafsync.
	LogLevel string `json:"logLevel" jsonschema:"enum=debug,enum=info,enum=error"`
	// Config is leafsync's config file (docs/configuration.md); unset fields keep leafsync's defaults.
	Config config.Config `json:"config"`
	// ExtraArgs are added to `leafsync run`'s arguments.
	ExtraArgs []string `json:"extraArgs"`
	// ExtraVolumes are added to the pod (e.g. etcd client certificates).
	ExtraVolumes []Object `json:"extraVolumes"`
	// ExtraVolumeMounts are added to leafsync's container.
	ExtraVolumeMounts []Object          `json:"extraVolumeMounts"`
	HeartbeatPriority HeartbeatPriority `json:"heartbeatPriority"`
	PodSync           PodSync           `json:"podSync"`
	// NodeFence is a ValidatingAdmissionPolicy that lets leafsync's ServiceAccount write and delete only its own leaves and their Leases.
	NodeFence      Toggle         `json:"nodeFence"`
	ServiceAccount ServiceAccount `json:"serviceAccount"`
	// Resources of leafsync's container.
	Resources Object `json:"resources"`
	// PodAnnotations are added to leafsync's pods.
	PodAnnotations map[string]string `json:"podAnnotations"`
	// PodLabels are added to leafsync's pods.
	PodLabels map[string]string `json:"podLabels"`
	// PodSecurityContext of leafsync's pods.
	PodSecurityContext Object `json:"podSecurityContext"`
	// SecurityContext of leafsync's container.
	SecurityContext Object `json:"securityContext"`
	// NodeSelector of leafsync's pods.
	NodeSelector map[string]string `json:"nodeSelector"`
	// Tolerations of leafsync's pods.
	Tolerations []Object `json:"tolerations"`
	// Affinity of leafsync's pods; when empty, replicas prefer different host nodes.
	Affinity Object `json:"affinity"`
	// TopologySpreadConstraints of leafsync's pods.
	TopologySpreadConstraints []Object `json:"topologySpreadConstraints"`
	// PriorityClassName of leafsync's pods.
	PriorityClassName string         `json:"priorityClassName"`
	Metrics           Metrics        `json:"metrics"`
	PrometheusRule    PrometheusRule `json:"prometheusRule"`
	Dashboard         Dashboard      `json:"dashboard"`
	// HealthProbePort serves /healthz and /readyz.
	HealthProbePort     int                 `json:"healthProbePort" jsonschema:"minimum=1,maximum=65535"`
	PodDisruptionBudget PodDisruptionBudget `json:"podDisruptionBudget"`
	Uninstall           Uninstall           `json:"uninstall"`
}

// Uninstall is the chart's pre-delete hook: a Job that runs `leafsync
// uninstall` before helm deletes the chart's objects.
type Uninstall struct {
	// Cleanup drains every member's leaf (its pods evicted, each finished once its member copy is gone), deregisters every member (leafsync removes the leaves, their Leases and its records), scales leafsync to zero, and deletes its leader-election Lease and state ConfigMaps.
	Cleanup bool `json:"cleanup"`
	// Timeout of each of those steps; the hook fails (and helm uninstall with it) when one takes longer.
	Timeout hysteresis.Duration `json:"timeout"`
}

// Image is leafsync's container image.
type Image struct {
	Repository string `json:"repository"`
	// Tag defaults to the chart's appVersion.
	Tag        string `json:"tag"`
	PullPolicy string `json:"pullPolicy" jsonschema:"enum=Always,enum=IfNotPresent,enum=Never"`
}

// HeartbeatPriority puts leafsync's Lease renewals at kubelets' API
// priority (a FlowSchema into the built-in node-high priority level), and
// its own Leases in the release namespace (leader election, shard and
// member Leases) at controllers' leader-election priority level.
type HeartbeatPriority struct {
	Enabled bool `json:"enabled"`
	// MatchingPrecedence of the FlowSchema of the leaves' Leases: after system-node-high (400), before service-accounts (9000).
	MatchingPrecedence int `json:"matchingPrecedence" jsonschema:"minimum=1,maximum=10000"`
	// LeaderElectionMatchingPrecedence of the FlowSchema of leafsync's own Leases: after system-leader-election (100), before service-accounts (9000).
	LeaderElectionMatchingPrecedence int `json:"leaderElectionMatchingPrecedence" jsonschema:"minimum=1,maximum=10000"`
}

// PodSync configures the chart's RBAC for pod sync.
type PodSync struct {
	// ReadReferencedSecrets lets leafsync get, by name, the Secrets that pods on leaves reference, in any namespace (ConfigMaps always); without it such pods wait with a Warning Event.
	ReadReferencedSecrets bool `json:"readReferencedSecrets"`
	// IssueHostTokens lets leafsync request ServiceAccount tokens (serviceaccounts/token create) for pods on leaves, bound to each pod; also granted when config.podSync.hostAPIServer is set. Needed when only registrations set leafsync.io/host-api-server.
	IssueHostTokens bool `json:"issueHostTokens"`
}

// ServiceAccount of leafsync's pods.
type ServiceAccount struct {
	Create      bool              `json:"create"`
	Name        string            `json:"name"`
	Annotations map[string]string `json:"annotations"`
}

// Metrics configures the /metrics endpoint and its scraping.
type Metrics struct {
	Port           int            `json:"port" jsonschema:"minimum=1,maximum=65535"`
	Service        Toggle         `json:"service"`
	ServiceMonitor ServiceMonitor `json:"serviceMonitor"`
}

// Toggle turns an object of the chart on or off.
type Toggle struct {
	Enabled bool `json:"enabled"`
}

// ServiceMonitor for the Prometheus Operator.
type ServiceMonitor struct {
	// Enabled renders it when the cluster has the ServiceMonitor CRD (or Force is set).
	Enabled bool `json:"enabled"`
	// Force renders it even when the CRD is not found (helm template, GitOps).
	Force    bool              `json:"force"`
	Interval string            `json:"interval" jsonschema:"pattern=^([0-9]+(ms|s|m|h))+$"`
	Labels   map[string]string `json:"labels"`
}

// PrometheusRule carries files/alerts.yaml for the Prometheus Operator.
type PrometheusRule struct {
	// Enabled renders it when the cluster has the PrometheusRule CRD (or Force is set).
	Enabled bool `json:"enabled"`
	// Force renders it even when the CRD is not found (helm template, GitOps).
	Force  bool              `json:"force"`
	Labels map[string]string `json:"labels"`
}

// Dashboard is the Grafana dashboard as a ConfigMap for Grafana's sidecar.
type Dashboard struct {
	Enabled     bool              `json:"enabled"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// PodDisruptionBudget lets at most one replica be disrupted at a time (rendered with more than one).
type PodDisruptionBudget struct {
	Enabled bool `json:"enabled"`
}

// durationPattern is what hysteresis.Duration accepts: a Go duration.
const durationPattern = `^(0|-?([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`

// Schema returns the JSON schema of the chart's values: every key is
// optional (values.yaml has the defaults), unknown keys are refused.
func Schema(goComments map[string]string) *jsonschema.Schema {
	r := jsonschema.Reflector{
		// Every field optional; the schema checks types and keys only.
		RequiredFromJSONSchemaTags: true,
		DoNotReference:             true,
		ExpandedStruct:             true,
		CommentMap:                 goComments,
		Mapper: func(t reflect.Type) *jsonschema.Schema {
			switch t {
			case reflect.TypeFor[hysteresis.Duration]():
				return &jsonschema.Schema{Type: "string", Pattern: durationPattern, Description: "a duration, e.g. 90s or 1m30s"}
			case reflect.TypeFor[Object]():
				return &jsonschema.Schema{Type: "object"}
			}
			return nil
		},
	}
	s := r.Reflect(&Values{})
	s.Title = "leafsync chart values"
	return s
}

// SchemaJSON is Schema as the chart's values.schema.json.
func SchemaJSON(goComments map[string]string) ([]byte, error) {
	b, err := json.MarshalIndent(Schema(goComments), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
