package flapbench

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Kosmos's documented workaround for evictions on a leaf that flaps is a
// Kyverno ClusterPolicy, "kosmos-node-not-ready" (kosmos-io/kosmos-website,
// kosmos/docs/v0.2.0/tutorials/node-not-ready.md; it is not in the
// kosmos-io/kosmos tree). Kyverno's webhook cannot be installed here, so
// DenyPolicy re-implements its one rule as a ValidatingAdmissionPolicy:
//
//	match:          Pod, DELETE
//	context:        nodeStatus   = the Ready status of node oldObject.spec.nodeName
//	                isKosmosNode = that node's label kosmos.io/node
//	preconditions:  request.userInfo.username Equals system:serviceaccount:kube-system:node-controller
//	                nodeStatus NotEquals "True"
//	                length(isKosmosNode) GreaterThan 0
//	validate:       deny, with the message below
//
// A ValidatingAdmissionPolicy cannot fetch an object by a name taken from
// the request, which Kyverno's apiCall does; instead the policy's params
// are all the Nodes (paramKind Node, a selector matching every node), and
// each is checked only if it is the pod's node.

// denyPolicyName is the Kyverno policy's name.
const denyPolicyName = "kosmos-node-not-ready"

// DenyPolicy returns the policy and its binding. namespaces, when not
// empty, limits the binding to those namespaces (the Kyverno policy covers
// every namespace; the benchmark runs Kosmos without the policy in the same
// host).
func DenyPolicy(namespaces ...string) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: denyPolicyName},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail), // Kyverno's Enforce webhooks fail closed
			ParamKind:     &admissionv1.ParamKind{APIVersion: "v1", Kind: "Node"},
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Delete},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				},
			}}},
			Variables: []admissionv1.Variable{
				{Name: "isPodNode", Expression: `params.metadata.name == oldObject.spec.nodeName`},
				// status.conditions[?type=='Ready'].status | [0]; null when absent.
				{Name: "nodeStatus", Expression: `has(params.status) && has(params.status.conditions) && params.status.conditions.exists(c, c.type == 'Ready') ? params.status.conditions.filter(c, c.type == 'Ready')[0].status : ''`},
				// metadata.labels."kosmos.io/node"; null when absent.
				{Name: "isKosmosNode", Expression: `has(params.metadata.labels) && 'kosmos.io/node' in params.metadata.labels ? params.metadata.labels['kosmos.io/node'] : ''`},
			},
			Validations: []admissionv1.Validation{{
				// Allowed unless all three preconditions hold for the pod's node.
				Expression: `!(variables.isPodNode &&
  request.userInfo.username == 'system:serviceaccount:kube-system:node-controller' &&
  variables.nodeStatus != 'True' &&
  size(variables.isKosmosNode) > 0)`,
				// The Kyverno message (the API server trims its spaces).
				MessageExpression: `' ' + request.userInfo.username + ' delete pod ' + oldObject.metadata.name + ' of NotReady Kosmos ' + oldObject.spec.nodeName + ' Node is not allowed. '`,
				Reason:            ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: denyPolicyName},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: denyPolicyName,
			ParamRef: &admissionv1.ParamRef{
				Selector:                &metav1.LabelSelector{},
				ParameterNotFoundAction: ptr.To(admissionv1.AllowAction),
			},
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	if len(namespaces) > 0 {
		binding.Spec.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: namespaces,
			}},
		}}
	}
	return policy, binding
}
