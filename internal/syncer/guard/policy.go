// Package guard is the eviction guard that lives in the host's API server:
// a ValidatingAdmissionPolicy that refuses the taint manager's delete of a
// pod on a leaf unless leafsync has confirmed the leaf's member NotReady.
//
// The policy's params are leafsync's per-member readiness records
// (ConfigMaps labelled leafsync.io/eviction-guard=readiness in leafsync's
// namespace), written before a leaf is marked NotReady. The API server
// evaluates the policy once per record and every one must pass; a record
// only has an opinion about pods on its own leaf. Because nothing in the
// request path depends on leafsync, the guard holds while leafsync is
// paused, restarting or cut off from the host: exactly when the leaf's
// Lease lapses although its member is healthy. docs/eviction-guard.md has
// the threat model.
package guard

import (
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const (
	// Name of the ValidatingAdmissionPolicy and of its binding.
	Name = "leafsync-eviction-guard"
	// ParamLabel selects the readiness records the binding uses as params.
	ParamLabel      = "leafsync.io/eviction-guard"
	ParamLabelValue = "readiness"
	// DefaultIdentity is the user KCM's taint-eviction controller deletes
	// pods as (it shares node-controller's credentials).
	DefaultIdentity = "system:serviceaccount:kube-system:node-controller"
	// ConfirmedDown is the record state that lets evictions through.
	ConfirmedDown = "NotReady"
)

// Keys of a readiness record's data.
const (
	keyCluster = "cluster"
	KeyLeaf    = "leaf"
	KeyState   = "state"
	keySince   = "since"
	// KeyUserNoExecute lists the leaf's NoExecute taints node lifecycle
	// did not set (a user's maintenance taint, out-of-service), as
	// "key=value" joined by ",".
	KeyUserNoExecute = "userNoExecute"
)

// The CEL expressions. Each is evaluated once per readiness record.
//
// A record without a leaf has no opinion (a malformed record never blocks
// the host). A DELETE of a pod that is not on the record's leaf passes.
// While a user's NoExecute taint is on the leaf (userNoExecute), the delete
// of a pod that does not tolerate that taint for ever passes: the taint
// manager evicts it for the user's taint, which is no lapsed Lease's doing.
const (
	matchIdentity = `request.userInfo.username in %s`
	matchBound    = `has(oldObject.spec.nodeName) && oldObject.spec.nodeName != ''`

	allowExpression = `!has(params.data) || !('leaf' in params.data) || ` +
		`oldObject.spec.nodeName != params.data.leaf || ` +
		`('state' in params.data && params.data.state == 'NotReady') || ` +
		`('userNoExecute' in params.data && params.data.userNoExecute.split(',').exists(kv, kv != '' && !` + toleratesForever + `))`

	// toleratesForever: the pod (oldObject) has a toleration without
	// tolerationSeconds of the NoExecute taint kv ("key=value"), by the
	// rules of corev1.Toleration.ToleratesTaint.
	toleratesForever = `(has(oldObject.spec.tolerations) && oldObject.spec.tolerations.exists(t, ` +
		`!has(t.tolerationSeconds) && ` +
		`(!has(t.effect) || t.effect == '' || t.effect == 'NoExecute') && ` +
		`((has(t.operator) && t.operator == 'Exists' && (!has(t.key) || t.key == '' || t.key == kv.split('=')[0])) || ` +
		`((!has(t.operator) || t.operator == '' || t.operator == 'Equal') && has(t.key) && t.key == kv.split('=')[0] && ` +
		`(has(t.value) ? t.value : '') == (kv.split('=').size() > 1 ? kv.split('=')[1] : '')))))`

	messageExpression = `'leafsync eviction guard: pod ' + oldObject.metadata.namespace + '/' + oldObject.metadata.name + ` +
		`' is on leaf ' + params.data.leaf + ' of member ' + ('cluster' in params.data ? params.data.cluster : '?') + ` +
		`', which leafsync last saw ' + ('state' in params.data ? params.data.state : 'unknown') + ` +
		`('since' in params.data ? ' (since ' + params.data.since + ')' : '') + ` +
		`'. The leaf looks down because leafsync could not renew its Lease (paused, restarting or cut off from the host), not because the member is; ` +
		`evictions are allowed once leafsync confirms the member NotReady.'`
)

// Policy is the ValidatingAdmissionPolicy refusing deletes by identities
// (usernames) of pods on a leaf whose member is not confirmed NotReady.
func Policy(identities []string) *admissionv1.ValidatingAdmissionPolicy {
	return &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: objectMeta(),
		Spec:       PolicySpec(identities),
	}
}

// PolicySpec is the policy's spec; the chart renders the same one (checked
// by the chart's e2e test).
func PolicySpec(identities []string) admissionv1.ValidatingAdmissionPolicySpec {
	return admissionv1.ValidatingAdmissionPolicySpec{
		FailurePolicy: ptr.To(admissionv1.Fail),
		ParamKind:     &admissionv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
		MatchConstraints: &admissionv1.MatchResources{
			ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Delete},
					Rule: admissionv1.Rule{
						APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
						Scope: ptr.To(admissionv1.NamespacedScope),
					},
				},
			}},
		},
		MatchConditions: []admissionv1.MatchCondition{
			{Name: "eviction-identity", Expression: fmt.Sprintf(matchIdentity, celList(identities))},
			{Name: "bound-pod", Expression: matchBound},
		},
		Validations: []admissionv1.Validation{{
			Expression:        allowExpression,
			MessageExpression: messageExpression,
			Reason:            ptr.To(metav1.StatusReasonForbidden),
		}},
	}
}

// objectMeta is the name and labels of the policy and of its binding.
func objectMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:   Name,
		Labels: map[string]string{"app.kubernetes.io/name": "leafsync", "app.kubernetes.io/component": "eviction-guard"},
	}
}

// Binding binds the policy to the readiness records in namespace.
func Binding(namespace string) *admissionv1.ValidatingAdmissionPolicyBinding {
	return &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: objectMeta(),
		Spec:       BindingSpec(namespace),
	}
}

// BindingSpec is the binding's spec.
func BindingSpec(namespace string) admissionv1.ValidatingAdmissionPolicyBindingSpec {
	return admissionv1.ValidatingAdmissionPolicyBindingSpec{
		PolicyName: Name,
		ParamRef: &admissionv1.ParamRef{
			Namespace: namespace,
			Selector:  &metav1.LabelSelector{MatchLabels: map[string]string{ParamLabel: ParamLabelValue}},
			// No member registered: nothing to guard.
			ParameterNotFoundAction: ptr.To(admissionv1.AllowAction),
		},
		ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
	}
}

// celList renders strings as a CEL list literal.
func celList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
