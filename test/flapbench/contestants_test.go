//go:build e2e

package flapbench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leafsync/leafsync/test/harness"
)

// contestantSpec is one leaf implementation the benchmark can run.
type contestantSpec struct {
	name, leaf, ns string
	// kosmos: served by the host's one Kosmos cluster-manager; deny: with
	// the documented deny policy (DenyPolicy) on its namespace.
	kosmos, deny bool
}

// Every contestant, in report order; FLAPBENCH_CONTESTANTS (make
// CONTESTANTS=) selects some by name.
var contestantSpecs = []contestantSpec{
	{name: "leafsync", leaf: "leaf-member-leafsync", ns: "leafsync-apps"},
	{name: "virtual-kubelet", leaf: "vk-leaf", ns: "vk-apps"},
	{name: "kosmos", leaf: kosmosLeaf("member-kosmos"), ns: "kosmos-apps", kosmos: true},
	{name: "kosmos-deny", leaf: kosmosLeaf("member-kosmos-deny"), ns: "kosmos-deny-apps", kosmos: true, deny: true},
}

// contestantNotes explain the contestants in the report.
var contestantNotes = map[string]string{
	"kosmos": "Kosmos clustertree cluster-manager, its own timings (constants, not flags): " +
		"Lease renewed every 10s (40s) while a version call to the member succeeds, node status written every 60s",
	"kosmos-deny": "Kosmos + the documented deny policy (re-implemented: Kosmos's Kyverno rule as a ValidatingAdmissionPolicy)",
}

// lineup is the contestants of a run and what the report says of them.
type lineup struct {
	specs     []contestantSpec
	kosmosSrc string
	notes     []string
}

// selectContestants reads FLAPBENCH_CONTESTANTS ("" for all). The Kosmos
// contestants need a Kosmos checkout (KOSMOS_SRC) and its build; without
// them they are left out, with the reason.
func selectContestants(t *testing.T) lineup {
	var l lineup
	want := os.Getenv("FLAPBENCH_CONTESTANTS")
	for _, name := range strings.Split(want, ",") {
		if name != "" && !slices.ContainsFunc(contestantSpecs, func(s contestantSpec) bool { return s.name == name }) {
			t.Fatalf("FLAPBENCH_CONTESTANTS: no contestant %q", name)
		}
	}
	src, commit, kosmosErr := kosmosSource(t)
	for _, s := range contestantSpecs {
		if want != "" && !slices.Contains(strings.Split(want, ","), s.name) {
			continue
		}
		if s.kosmos && kosmosErr != nil {
			msg := fmt.Sprintf("%s left out: %v (docs/benchmarks/flap.md, \"The Kosmos contestants\", says how to get the tree)", s.name, kosmosErr)
			t.Log(msg)
			l.notes = append(l.notes, msg)
			continue
		}
		if s.kosmos {
			l.kosmosSrc = src
		}
		if n := contestantNotes[s.name]; n != "" {
			if s.kosmos {
				n += ", built from " + commit
			}
			l.notes = append(l.notes, s.name+": "+n)
		}
		l.specs = append(l.specs, s)
	}
	if len(l.specs) == 0 {
		t.Skip("no contestant can run")
	}
	return l
}

// startContestants starts each contestant's member, links and leaf
// implementation against the host.
func startContestants(t *testing.T, host *harness.Cluster, l lineup) []*contestant {
	ctx := context.Background()
	var cs, kosmos, deny []*contestant
	for _, s := range l.specs {
		m := harness.StartMember(t, harness.MemberOptions{Name: "member-" + s.name, Nodes: 2})
		if err := m.LiftNotReadyTaints(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.StartScheduler(); err != nil {
			t.Fatal(err)
		}
		if err := host.EnsureNamespace(ctx, s.ns); err != nil {
			t.Fatal(err)
		}
		c := &contestant{name: s.name, leaf: s.leaf, ns: s.ns, host: host.Client(), member: m,
			memberLink: harness.NewFaultProxy(t, s.name+"-member", m.Addr())}
		switch {
		case s.kosmos:
			kosmos = append(kosmos, c)
			if s.deny {
				deny = append(deny, c)
			}
		case s.name == "leafsync":
			c.hostLink = harness.NewFaultProxy(t, s.name+"-host", host.Addr())
			startLeafsync(t, host, c)
		case s.name == "virtual-kubelet":
			c.hostLink = harness.NewFaultProxy(t, s.name+"-host", host.Addr())
			startVirtualKubelet(t, host, c)
		}
		cs = append(cs, c)
	}
	if len(kosmos) > 0 {
		startKosmos(t, host, kosmos, l.kosmosSrc)
	}
	if len(deny) > 0 {
		var nss []string
		for _, c := range deny {
			nss = append(nss, c.ns)
		}
		policy, binding := DenyPolicy(nss...)
		arc := host.Client().AdmissionregistrationV1()
		if _, err := arc.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
			t.Fatalf("deny policy: %v", err)
		}
		if _, err := arc.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatalf("deny policy binding: %v", err)
		}
	}
	return cs
}

// ownZone puts a contestant's leaf in a zone of its own. KCM's node
// lifecycle controller rates evictions per zone and stops them in a zone
// where more than 2 nodes and 55% are NotReady (partial disruption, in a
// zone under 50 nodes): with three leaves that flap in one zone, none of
// them would be evicted, and the measure would depend on the line-up.
func ownZone(t *testing.T, c *contestant) {
	patch := fmt.Sprintf(`{"metadata":{"labels":{"topology.kubernetes.io/zone":%q}}}`, c.name+"-zone")
	if _, err := c.host.CoreV1().Nodes().Patch(context.Background(), c.leaf, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("%s: zone label: %v", c.name, err)
	}
}

// checkOwnZone: the leaf kept its zone to the end (a contestant that
// rewrote its node's labels would share KCM's zone "" with others again).
func checkOwnZone(t *testing.T, c *contestant) {
	o, ok, _ := c.rec.nodes.GetByKey(c.leaf)
	if !ok {
		t.Errorf("%s: leaf %s gone", c.name, c.leaf)
		return
	}
	if z := o.(*corev1.Node).Labels[corev1.LabelTopologyZone]; z != c.name+"-zone" {
		t.Errorf("%s: leaf zone %q at the end, want %q", c.name, z, c.name+"-zone")
	}
}

// hostLinks are the contestants' links to the host, each once (the
// Kosmos contestants share one).
func hostLinks(cs []*contestant) []*harness.FaultProxy {
	var out []*harness.FaultProxy
	for _, c := range cs {
		if !slices.Contains(out, c.hostLink) {
			out = append(out, c.hostLink)
		}
	}
	return out
}

// tolerateKosmos: Kosmos taints its leaves kosmos.io/node=true:NoSchedule
// and its docs have workloads tolerate it; the other leaves have no such
// taint, so every contestant's workloads carry the same toleration.
func tolerateKosmos(spec *corev1.PodSpec) {
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: "kosmos.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
}
