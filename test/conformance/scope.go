package conformance

// groups are the suite's describe blocks a node answers for
// (docs/conformance/README.md); a spec's group is the one its name starts with.
const groups = `\[(sig-node|sig-storage|sig-cli)\] (Pods Extended|Pods|ConfigMap|Secrets|Downward API|Projected|EmptyDir volumes|Variable Expansion|InitContainer|Container Lifecycle Hook|Probing container|Containers|Security Context|Kubectl logs|Kubectl client|Ephemeral Containers|PreStop|Sysctls|Pod InPlace Resize Container) `

// Focus is the in-scope specs: the [Conformance] specs of those groups.
const Focus = groups + `.*\[Conformance\]`

// Skips are the in-scope specs this topology cannot run, each with why;
// nothing else is skipped by us.
var Skips = map[string]string{}

// Smoke is a handful of in-scope specs that touch each path a pod on a leaf
// takes: creation and status (host IP), env from a Secret and the downward
// API, a ConfigMap volume that follows an update, and an exec into a pod.
const Smoke = `\[sig-node\] Pods should get a host IP|` +
	`\[sig-node\] Secrets should be consumable via the environment|` +
	`\[sig-node\] Downward API should provide pod name, namespace and IP address as env vars|` +
	`\[sig-storage\] ConfigMap updates should be reflected in volume|` +
	`\[sig-storage\] EmptyDir volumes pod should support shared volumes between containers`
