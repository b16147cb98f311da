package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/leafsync/leafsync/hysteresis"
	"github.com/leafsync/leafsync/internal/leafnode"
	"github.com/leafsync/leafsync/internal/syncer"
	"github.com/leafsync/leafsync/internal/syncer/config"
	"github.com/leafsync/leafsync/internal/syncer/enginestate"
	"github.com/leafsync/leafsync/internal/syncer/podsync/deletes"
	"github.com/leafsync/leafsync/internal/syncer/registration"
	"github.com/leafsync/leafsync/internal/syncer/shard"
	"github.com/leafsync/leafsync/internal/syncer/store"
)

// MemberStatus is one row of `leafsync status`.
type MemberStatus struct {
	Cluster string `json:"cluster"`
	Secret  string `json:"secret"`
	Leaf    string `json:"leaf"`
	// Owner is the replica that writes the member (its member Lease's
	// holder, with sharding); "" without sharding or before one takes it.
	Owner    string `json:"owner,omitempty"`
	State    string `json:"state"`
	Since    string `json:"since,omitempty"`
	Cordoned bool   `json:"cordoned"`
	// Verified is "true" or "false" (leafsync.io/verified), "-" before a
	// conclusive verification; VerifyFailed says why not.
	Verified     string `json:"verified"`
	VerifyFailed string `json:"verifyFailed,omitempty"`
	Penalty      string `json:"penalty,omitempty"`
	Link         string `json:"link"`
	SyncedPods   int    `json:"syncedPods"`
	Owed         string `json:"owedDeletes,omitempty"`
	LastError    string `json:"lastError,omitempty"`
}

// statusReader gathers MemberStatus rows from the host; the store adds
// penalty and owed deletes when it can be read.
type statusReader struct {
	host      kubernetes.Interface
	namespace string
	// fromStore fills engine details (penalty, owed deletes) from the
	// state store; nil when unavailable.
	fromStore func(ctx context.Context, row *MemberStatus) error
}

func (r statusReader) read(ctx context.Context) ([]MemberStatus, error) {
	secrets, err := r.host.CoreV1().Secrets(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: registration.LabelCluster})
	if err != nil {
		return nil, fmt.Errorf("listing registration Secrets in %s: %w", r.namespace, err)
	}
	owners, err := r.owners(ctx)
	if err != nil {
		return nil, err
	}
	var rows []MemberStatus
	for _, s := range secrets.Items {
		cluster := s.Labels[registration.LabelCluster]
		leaf := s.Annotations[registration.AnnotationLeafName]
		if leaf == "" {
			leaf = "leaf-" + cluster
		}
		row := MemberStatus{
			Cluster: cluster, Secret: s.Name, Leaf: leaf, State: "-", Owner: owners[cluster],
			Link:         s.Annotations[registration.AnnotationStatus],
			Verified:     dash(s.Annotations[registration.AnnotationVerified]),
			VerifyFailed: s.Annotations[registration.AnnotationVerifyFailed],
		}
		if reason := s.Annotations[registration.AnnotationStatusReason]; row.Link != "Connected" && reason != "" {
			row.LastError = reason + ": " + s.Annotations[registration.AnnotationStatusMessage]
		}
		node, err := r.host.CoreV1().Nodes().Get(ctx, leaf, metav1.GetOptions{})
		if err == nil {
			row.State, row.Since = leafState(node)
			for _, t := range node.Spec.Taints {
				row.Cordoned = row.Cordoned || t.Key == leafnode.TaintUnreachable
			}
			pods, err := r.host.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", leaf).String()})
			if err == nil {
				row.SyncedPods = len(pods.Items)
			}
		}
		if r.fromStore != nil {
			if err := r.fromStore(ctx, &row); err != nil && row.LastError == "" {
				row.LastError = "state store: " + err.Error()
			}
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Cluster < rows[j].Cluster })
	return rows, nil
}

// owners reads, with one list of the member Leases, which replica writes
// each member: the holder's incarnation (<replica>-<8 hex digits>) without
// its suffix. Without sharding there are none.
func (r statusReader) owners(ctx context.Context) (map[string]string, error) {
	leases, err := r.host.CoordinationV1().Leases(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: shard.LabelLeaseKind + "=member"})
	if err != nil {
		return nil, fmt.Errorf("listing member Leases in %s: %w", r.namespace, err)
	}
	owners := map[string]string{}
	for _, l := range leases.Items {
		if holder := ptr.Deref(l.Spec.HolderIdentity, ""); holder != "" {
			owners[l.Annotations[shard.AnnotationCluster]] = shard.ReplicaOf(holder)
		}
	}
	return owners, nil
}

// leafState maps the leaf's Ready condition (written by leafsync from the
// engine's decision) back to the engine state.
func leafState(n *corev1.Node) (state, since string) {
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		since = c.LastTransitionTime.UTC().Format(time.RFC3339)
		switch c.Reason {
		case leafnode.ReasonMemberReachable:
			return "Ready", since
		case leafnode.ReasonMemberSuspect:
			return "Suspect", since
		case leafnode.ReasonMemberUnreachable:
			return "NotReady", since
		case leafnode.ReasonMemberRecovering:
			return "Recovering", since
		}
		// Not written by leafsync (KCM marked it Unknown: leafsync is not
		// renewing the Lease).
		return "Unknown(" + c.Reason + ")", since
	}
	return "-", ""
}

func newStatusCommand() *cobra.Command {
	var kubeconfig, namespace, output, configFile string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show every registered member: owner, state, cordon, link, synced pods, last error",
		Long: `status reads the host cluster (registration Secrets, leaf Nodes and their
pods, member Leases) and prints one row per registered member. With more
than one replica, OWNER is the replica that writes the member. Installed on PATH as
kubectl-leafsync, it also runs as "kubectl leafsync status".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" && output != "yaml" {
				return fmt.Errorf("-o %q: must be table, json or yaml", output)
			}
			restCfg, err := cliRESTConfig(kubeconfig)
			if err != nil {
				return err
			}
			host, err := newClient(restCfg)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			cfg := config.Default()
			if configFile != "" {
				if cfg, err = config.Load(configFile); err != nil {
					return err
				}
			}
			cfg.Namespace = namespace
			reader := statusReader{host: host, namespace: namespace}
			if st, err := syncer.OpenStore(restCfg, cfg); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: state store not readable (%v); penalty and owed deletes are not shown\n", err)
			} else {
				reader.fromStore = storeDetails(st, cfg.Hysteresis)
			}
			rows, err := reader.read(ctx)
			if err != nil {
				return err
			}
			return printStatus(cmd.OutOrStdout(), rows, output)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "host cluster kubeconfig (default: $KUBECONFIG or ~/.kube/config, else in-cluster)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "leafsync-system", "leafsync's namespace")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, json or yaml")
	cmd.Flags().StringVar(&configFile, "config", "", "leafsync's config file, to find the state store (default: the kube backend in --namespace)")
	return cmd
}

// storeDetails reads a member's record in the state store: the engine's
// snapshot (state, since, penalty) and the downstream deletes that wait.
func storeDetails(st store.Store, hcfg hysteresis.FleetConfig) func(context.Context, *MemberStatus) error {
	return func(ctx context.Context, row *MemberStatus) error {
		rec, err := store.ReadCluster(ctx, st, row.Cluster)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		snap, err := enginestate.Snapshot.Read(rec)
		if err != nil {
			return fmt.Errorf("reading the engine snapshot: %w", err)
		}
		pending, err := deletes.Pending.Read(rec)
		if err != nil {
			return fmt.Errorf("reading the pending deletes: %w", err)
		}
		if len(snap) > 0 {
			fleet, err := hysteresis.NewRawFleet(hcfg)
			if err != nil {
				return err
			}
			if err := fleet.RestoreCluster(snap); err != nil {
				return fmt.Errorf("decoding the engine snapshot: %w", err)
			}
			if hs, ok := fleet.Status(row.Cluster); ok {
				row.Penalty = fmt.Sprintf("%.0f", hs.Penalty)
				// The leaf shows what the host sees; the engine may know more
				// (e.g. Suspect while the leaf is still Ready).
				if row.State == "-" || strings.HasPrefix(row.State, "Unknown") {
					row.State = hs.State.String()
				}
			}
		}
		counts := map[deletes.DeleteKind]int{}
		for _, d := range pending {
			counts[d.Kind]++
		}
		var parts []string
		for _, k := range []deletes.DeleteKind{deletes.Owed, deletes.Deferred, deletes.Retained} {
			if counts[k] > 0 {
				parts = append(parts, fmt.Sprintf("%s=%d", strings.ToLower(string(k)), counts[k]))
			}
		}
		row.Owed = strings.Join(parts, ",")
		return nil
	}
}

// cliRESTConfig loads the host config as kubectl does: --kubeconfig, else
// $KUBECONFIG, else ~/.kube/config, else in-cluster.
func cliRESTConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("host cluster config: %w", err)
	}
	cfg.UserAgent = "leafsync-cli/" + version
	return cfg, nil
}

func printStatus(w io.Writer, rows []MemberStatus, output string) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	case "yaml":
		data, err := yaml.Marshal(rows)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tLEAF\tOWNER\tSTATE\tSINCE\tCORDONED\tVERIFIED\tPENALTY\tLINK\tSYNCED PODS\tOWED\tLAST ERROR")
	for _, r := range rows {
		lastError := r.LastError
		if lastError == "" && r.VerifyFailed != "" {
			lastError = "verification: " + r.VerifyFailed
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Cluster, r.Leaf, dash(r.Owner), r.State, dash(r.Since), r.Cordoned, r.Verified,
			dash(r.Penalty), dash(r.Link), r.SyncedPods, dash(r.Owed), dash(truncate(lastError, 80)))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncate(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
