package harness

import (
	"context"
	"time"
)

// HostOptions shapes a host cluster.
type HostOptions struct {
	// Timings of KCM's node lifecycle; zero means DefaultTestTimings.
	Timings Timings
	// Workers is the number of ordinary, heartbeating nodes (default 1).
	// At least one is needed: when every node is NotReady, KCM's node
	// lifecycle controller enters full-disruption mode and evicts nothing.
	Workers int
	// AuditPolicy replaces the default audit policy (ClusterOptions).
	AuditPolicy string
	// KubeletClientCert: see ClusterOptions.
	KubeletClientCert bool
	// Address: see ClusterOptions.
	Address string
}

// StartHost starts a host cluster: etcd, kube-apiserver, KCM with the
// controllers that evict and replace pods, kube-scheduler, and kwok keeping
// the ordinary worker nodes host-worker-N alive.
func StartHost(t TB, opts HostOptions) *Cluster {
	t.Helper()
	if opts.Workers == 0 {
		opts.Workers = 1
	}
	c := StartCluster(t, ClusterOptions{
		Name:        "host",
		Controllers: HostControllers,
		Timings:     opts.Timings,
		Scheduler:   true,
		Kwok:        true,
		Audit:       true,
		AuditPolicy: opts.AuditPolicy,

		KubeletClientCert: opts.KubeletClientCert,
		Address:           opts.Address,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := c.AddNodes(ctx, "host-worker", opts.Workers, NodeSpec{
		Labels: map[string]string{"topology.kubernetes.io/zone": "host-zone"},
	}); err != nil {
		t.Fatalf("harness: host workers: %v", err)
	}
	return c
}

// MemberOptions shapes a member cluster.
type MemberOptions struct {
	// Name of the member ("member-a").
	Name string
	// Nodes is the number of kwok nodes, named <name>-node-N.
	Nodes int
	// Node shapes every node.
	Node NodeSpec
	// Pods is the number of running pods in namespace "workload", spread
	// over the nodes, named <name>-pod-N.
	Pods int
	// Pod shapes every pod.
	Pod PodSpec
	// Timings of the member's KCM and kwok (zero: DefaultTestTimings); a
	// longer grace period makes kwok renew its nodes' Leases less often,
	// which matters with hundreds of nodes.
	Timings Timings
	// KwokConfig: see ClusterOptions (kwok's kubelet server for logs,
	// exec and port-forward).
	KwokConfig string
	// Address: see ClusterOptions.
	Address string
	// Audit writes the member's audit log of pod and node writes
	// (ClusterOptions.Audit), e.g. to tell which leafsync replica wrote a
	// member pod (its user agent).
	Audit bool
}

// StartMember starts a member cluster with kwok nodes and running pods.
func StartMember(t TB, opts MemberOptions) *Cluster {
	t.Helper()
	c := StartCluster(t, ClusterOptions{Name: opts.Name, Controllers: MemberControllers, Kwok: true, Timings: opts.Timings, KwokConfig: opts.KwokConfig, Address: opts.Address, Audit: opts.Audit})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	nodes, err := c.AddNodes(ctx, opts.Name+"-node", opts.Nodes, opts.Node)
	if err != nil {
		t.Fatalf("harness: %s nodes: %v", opts.Name, err)
	}
	if opts.Pods > 0 {
		if opts.Pod.Namespace == "" {
			opts.Pod.Namespace = "workload"
		}
		if _, err := c.AddPods(ctx, opts.Name+"-pod", opts.Pods, nodes, opts.Pod); err != nil {
			t.Fatalf("harness: %s pods: %v", opts.Name, err)
		}
	}
	return c
}
