package guard

import (
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
)

// eval runs one CEL expression of the policy on a request fixture, as the
// API server does: request, oldObject and params as JSON-like values.
func eval(t *testing.T, expr string, vars map[string]any) any {
	t.Helper()
	env, err := cel.NewEnv(
		ext.Strings(), // the API server's CEL has the strings library
		cel.Variable("request", cel.DynType),
		cel.Variable("oldObject", cel.DynType),
		cel.Variable("params", cel.DynType),
	)
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("compiling %s: %v", expr, iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := prg.Eval(vars)
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return out.Value()
}

func pod(node string) map[string]any {
	spec := map[string]any{}
	if node != "" {
		spec["nodeName"] = node
	}
	return map[string]any{"metadata": map[string]any{"name": "db-0", "namespace": "apps"}, "spec": spec}
}

// tolerating is pod(node) with tolerations.
func tolerating(node string, tols ...map[string]any) map[string]any {
	p := pod(node)
	list := make([]any, len(tols))
	for i, t := range tols {
		list[i] = t
	}
	p["spec"].(map[string]any)["tolerations"] = list
	return p
}

// userTainted is a Ready record of leaf with a user's NoExecute taints.
func userTainted(leaf, taints string) map[string]any {
	r := readiness(leaf, "Ready")
	r["data"].(map[string]any)[KeyUserNoExecute] = taints
	return r
}

func params(data map[string]any) map[string]any {
	if data == nil {
		return map[string]any{"metadata": map[string]any{"name": "x"}}
	}
	return map[string]any{"data": data}
}

func readiness(leaf, state string) map[string]any {
	return params(map[string]any{"cluster": "member-a", "leaf": leaf, "state": state, "since": "2026-11-23T01:00:00Z"})
}

// admitted: does the policy let the request through with these records?
// Every matchCondition must hold for the policy to apply; then the
// validation must pass for every record.
func admitted(t *testing.T, identities []string, user string, old map[string]any, records ...map[string]any) (bool, string) {
	t.Helper()
	spec := PolicySpec(identities)
	req := map[string]any{"userInfo": map[string]any{"username": user}, "operation": "DELETE"}
	for _, mc := range spec.MatchConditions {
		if eval(t, mc.Expression, map[string]any{"request": req, "oldObject": old}) != true {
			return true, "" // the policy does not apply
		}
	}
	for _, p := range records {
		vars := map[string]any{"request": req, "oldObject": old, "params": p}
		v := spec.Validations[0]
		if eval(t, v.Expression, vars) != true {
			return false, eval(t, v.MessageExpression, vars).(string)
		}
	}
	return true, ""
}

func TestPolicyExpressions(t *testing.T) {
	ids := []string{DefaultIdentity}
	const leafA, leafB = "leaf-member-a", "leaf-member-b"
	for _, tc := range []struct {
		name    string
		ids     []string
		user    string
		pod     map[string]any
		records []map[string]any
		allowed bool
	}{
		{"taint manager, member Ready: refused", ids, DefaultIdentity, pod(leafA), []map[string]any{readiness(leafA, "Ready")}, false},
		{"taint manager, member Suspect: refused", ids, DefaultIdentity, pod(leafA), []map[string]any{readiness(leafA, "Suspect")}, false},
		{"taint manager, member Recovering: refused", ids, DefaultIdentity, pod(leafA), []map[string]any{readiness(leafA, "Recovering")}, false},
		{"taint manager, member confirmed NotReady: allowed", ids, DefaultIdentity, pod(leafA), []map[string]any{readiness(leafA, "NotReady")}, true},
		{"other members' records have no opinion", ids, DefaultIdentity, pod(leafA),
			[]map[string]any{readiness(leafB, "Ready"), readiness(leafA, "NotReady")}, true},
		{"one record refusing is enough", ids, DefaultIdentity, pod(leafA),
			[]map[string]any{readiness(leafB, "NotReady"), readiness(leafA, "Ready")}, false},
		{"pod on a node that is not a leaf", ids, DefaultIdentity, pod("worker-1"), []map[string]any{readiness(leafA, "Ready")}, true},
		{"unbound pod", ids, DefaultIdentity, pod(""), []map[string]any{readiness(leafA, "Ready")}, true},
		{"a user's delete", ids, "alice", pod(leafA), []map[string]any{readiness(leafA, "Ready")}, true},
		{"another controller's delete", ids, "system:serviceaccount:kube-system:statefulset-controller", pod(leafA), []map[string]any{readiness(leafA, "Ready")}, true},
		{"configured identities", []string{"system:serviceaccount:kube-system:node-controller", "system:serviceaccount:kube-system:pod-garbage-collector"},
			"system:serviceaccount:kube-system:pod-garbage-collector", pod(leafA), []map[string]any{readiness(leafA, "Ready")}, false},
		{"record without data has no opinion", ids, DefaultIdentity, pod(leafA), []map[string]any{params(nil)}, true},
		{"record without a leaf has no opinion", ids, DefaultIdentity, pod(leafA), []map[string]any{params(map[string]any{"state": "Ready"})}, true},
		{"record without a state refuses", ids, DefaultIdentity, pod(leafA), []map[string]any{params(map[string]any{"leaf": leafA})}, false},
		{"no records (parameterNotFoundAction: Allow)", ids, DefaultIdentity, pod(leafA), nil, true},
		{"a user's NoExecute taint the pod does not tolerate: the taint manager's eviction for it passes", ids, DefaultIdentity, pod(leafA),
			[]map[string]any{userTainted(leafA, "maintenance=")}, true},
		{"one of several user taints not tolerated", ids, DefaultIdentity,
			tolerating(leafA, map[string]any{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}),
			[]map[string]any{userTainted(leafA, "maintenance=,example.com/drain=now")}, true},
		{"user taint tolerated for ever (Exists): refused", ids, DefaultIdentity,
			tolerating(leafA, map[string]any{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}),
			[]map[string]any{userTainted(leafA, "maintenance=")}, false},
		{"user taint tolerated for ever (tolerates everything): refused", ids, DefaultIdentity,
			tolerating(leafA, map[string]any{"operator": "Exists"}),
			[]map[string]any{userTainted(leafA, "maintenance=")}, false},
		{"user taint tolerated for ever (Equal, same value): refused", ids, DefaultIdentity,
			tolerating(leafA, map[string]any{"key": "example.com/drain", "value": "now"}),
			[]map[string]any{userTainted(leafA, "example.com/drain=now")}, false},
		{"user taint, toleration of another value: passes", ids, DefaultIdentity,
			tolerating(leafA, map[string]any{"key": "example.com/drain", "operator": "Equal", "value": "later"}),
			[]map[string]any{userTainted(leafA, "example.com/drain=now")}, true},
		{"user taint tolerated for a while: evicted after it, passes", ids, DefaultIdentity,
			tolerating(leafA, map[string]any{"key": "maintenance", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}),
			[]map[string]any{userTainted(leafA, "maintenance=")}, true},
		{"a toleration of another effect does not count", ids, DefaultIdentity,
			tolerating(leafA, map[string]any{"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}),
			[]map[string]any{userTainted(leafA, "maintenance=")}, true},
		{"no user taint (empty list): refused", ids, DefaultIdentity, pod(leafA), []map[string]any{userTainted(leafA, "")}, false},
		{"another leaf's user taint has no say", ids, DefaultIdentity, pod(leafA),
			[]map[string]any{userTainted(leafB, "maintenance="), readiness(leafA, "Ready")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, msg := admitted(t, tc.ids, tc.user, tc.pod, tc.records...)
			if ok != tc.allowed {
				t.Fatalf("admitted = %v, want %v (message %q)", ok, tc.allowed, msg)
			}
			if !ok {
				for _, want := range []string{"apps/db-0", leafA, "eviction guard"} {
					if !strings.Contains(msg, want) {
						t.Errorf("message %q does not name %q", msg, want)
					}
				}
			}
		})
	}
}

func TestRefusalMessage(t *testing.T) {
	_, msg := admitted(t, []string{DefaultIdentity}, DefaultIdentity, pod("leaf-member-a"), readiness("leaf-member-a", "Ready"))
	want := "leafsync eviction guard: pod apps/db-0 is on leaf leaf-member-a of member member-a, which leafsync last saw Ready (since 2026-11-23T01:00:00Z)."
	if !strings.HasPrefix(msg, want) {
		t.Fatalf("message\n%s\nwant prefix\n%s", msg, want)
	}
}
