// Package volumes provisions host PersistentVolumeClaims into members: a
// claim used by a pod the host scheduler places on a leaf is bound in the
// host to a stand-in PV leafsync owns, and backed in the member by a claim
// of the same name that the member binds itself.
//
// leafsync is an external provisioner (Provisioner, "leafsync.io/member")
// in the host, in Kubernetes' own WaitForFirstConsumer flow:
//
//	host scheduler (VolumeBinding, PreBind)   claim gets selected-node=<leaf>, waits for Bound
//	host PV controller                        claim gets storage-provisioner=leafsync.io/member
//	volumes.provision                         stand-in PV leafsync-<claim uid>: claimRef the claim,
//	                                          local path, nodeAffinity hostname=<leaf>
//	host PV controller                        claim Bound to the stand-in; the scheduler binds the pod
//	pod sync, before the member pod (Ensure)  member claim: same name, the mapped member class
//	member scheduler and PV controller        member claim Bound where the member pod runs
//	volumes.follow (every resync)             member capacity -> stand-in (-> host claim status),
//	                                          member Lost/Pending -> Event on the host claim
//	host claim deleted (stand-in Released)    member claim deleted once no member pod uses it
//	                                          (reclaim Delete; Retain keeps both), then the stand-in
//
// The stand-in's nodeAffinity pins every later pod of the claim to the
// leaf, natively: the data lives in that member and is never moved. A pod
// of the claim that cannot be placed there stays Pending, with an Event
// (VolumeInMember) while the member is NotReady or gone.
//
// The decisions are pure (decideProvision, decideFollow; decide.go), and
// the member's owner's boundary holds: a member claim of the name that
// leafsync did not make for this host claim is never used, changed or
// deleted, and a host class the registration does not map
// (registration.AnnotationStorageClasses) provisions nothing; each refusal
// is a Warning Event on the host claim and its pods. docs/reflection.md
// says what is reflected and what is not.
package volumes
