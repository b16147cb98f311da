// Package reflector keeps a member's copies of the host objects its synced
// pods use (ConfigMaps and Secrets), so that a name in a pod resolves in
// the member to the host's object and never to the member's own, and of
// the Services of their namespaces, so that the member's kubelet injects
// the Services' environment variables (services.go).
//
// One shape for every kind: a Kind says how to read the host object, what
// copy of it the member gets (an apply configuration), and how to compare,
// list and delete copies. The Reflector decides per copy (planCopy: keep,
// create, update, replace, delete, refuse, wait) from the objects as they
// are, not from what it remembers writing, so a copy deleted or edited by
// hand in the member is restored; it writes every copy with server-side
// apply (field manager "leafsync").
//
// The member's owner's boundary (#26): a member object of a copy's name
// that leafsync did not create (Owner.Owns) is never read beyond its
// labels, used, changed or deleted; the pod that needs it is refused.
//
//	Ensure (a pod is about to be created)   Refresh (every resync)
//	  read member copy, read host object      list copies, host objects the pods use
//	            \                                   /
//	             planCopy -> apply | delete+apply | delete | Refusal
package reflector
