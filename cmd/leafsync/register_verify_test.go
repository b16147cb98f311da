package main

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/leafsync/leafsync/internal/syncer/verify"
)

// `register --create-service-account` grants every right verification
// checks, so a member registered that way passes the rights check; and
// with --kubelet-api, the kubelet API's too.
func TestRegisterGrantsWhatVerificationChecks(t *testing.T) {
	for _, kubeletAPI := range []bool{false, true} {
		rules := memberRulesFor(kubeletAPI)
		for _, r := range verify.Rights(kubeletAPI) {
			res := r.Resource
			if r.Subresource != "" {
				res += "/" + r.Subresource
			}
			granted := slices.ContainsFunc(rules, func(rule rbacv1.PolicyRule) bool {
				return slices.Contains(rule.APIGroups, "") && slices.Contains(rule.Resources, res) && slices.Contains(rule.Verbs, r.Verb)
			})
			if !granted {
				t.Errorf("kubeletAPI=%v: register does not grant %s, which verification checks (%s)", kubeletAPI, r, r.Why)
			}
		}
	}
}
