package translate

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/leafsync/leafsync/internal/syncer/member"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podmeta"
	"github.com/leafsync/leafsync/internal/syncer/podsync/podstatus"
)

var updateDoc = flag.Bool("update", false, "rewrite the spec fidelity tables of docs/pod-sync.md")

// What leafsync does to a field on its way between host and member.
type treatment string

const (
	copied  treatment = "copied"  // the same value arrives
	dropped treatment = "dropped" // nothing arrives: the receiver keeps its own (a new member pod's is empty)
	changed treatment = "changed" // something else arrives
)

type fate struct {
	treatment
	why string // for the docs; empty for copied fields
}

// memberPodFields is what MemberPod does to each field of a host pod. A
// field is named by its JSON path; the fields of containers, init
// containers and affinity are named one by one, every other field as a
// whole.
var memberPodFields = map[string]fate{
	"metadata.name":                       {copied, ""},
	"metadata.namespace":                  {copied, ""},
	"metadata.labels":                     {changed, "`leafsync.io/managed`, `cluster`, `host`, `host-uid` added: the member pod says whose it is"},
	"metadata.annotations":                {changed, "leafsync's own added (`leafsync.io/leaf`, `spec-hash`, `owner`, …); `last-applied-configuration` and `leafsync.io/member-uid` (the host's bookkeeping) removed"},
	"metadata.generateName":               {dropped, "the member pod has the host pod's name"},
	"metadata.selfLink":                   {dropped, "the member API server's own"},
	"metadata.uid":                        {dropped, "the member API server's own; the host's is the label `leafsync.io/host-uid`"},
	"metadata.resourceVersion":            {dropped, "the member API server's own"},
	"metadata.generation":                 {dropped, "the member API server's own"},
	"metadata.creationTimestamp":          {dropped, "the member API server's own"},
	"metadata.deletionTimestamp":          {dropped, "a host deletion is forwarded as a DELETE, by cause"},
	"metadata.deletionGracePeriodSeconds": {dropped, "the grace period goes with the forwarded DELETE"},
	"metadata.ownerReferences":            {dropped, "the host's owners do not exist in the member; the owner is the annotation `leafsync.io/owner`"},
	"metadata.finalizers":                 {dropped, "the host's finalizers are for host controllers (leafsync's own holds the host pod)"},
	"metadata.managedFields":              {dropped, "the member API server's own"},

	"spec.volumes":                       {changed, "a projected ServiceAccount token (a credential for the host API server) becomes a token of the host ServiceAccount from the pod's token Secret, as does `kube-root-ca.crt` beside it (the host's CA); the volume's other sources stay (docs/pod-sync.md, The identity a pod runs as)"},
	"spec.ephemeralContainers":           {dropped, "added to the running member pod through its subresource, never at creation"},
	"spec.terminationGracePeriodSeconds": {copied, ""},
	"spec.activeDeadlineSeconds":         {copied, ""},
	"spec.restartPolicy":                 {copied, ""},
	"spec.dnsPolicy":                     {copied, ""},
	"spec.dnsConfig":                     {copied, ""},
	"spec.nodeSelector":                  {dropped, "selects host nodes (the leaf)"},
	"spec.serviceAccountName":            {dropped, "the member namespace's `default`, or the member ServiceAccount of `leafsync.io/member-service-account`"},
	"spec.serviceAccount":                {dropped, "deprecated spelling of `serviceAccountName`"},
	"spec.automountServiceAccountToken":  {changed, "`false` (no API credential in the member) unless `leafsync.io/member-service-account` names one"},
	"spec.nodeName":                      {dropped, "the leaf; the member's scheduler places the pod"},
	"spec.hostNetwork":                   {copied, ""},
	"spec.hostPID":                       {copied, ""},
	"spec.hostIPC":                       {copied, ""},
	"spec.shareProcessNamespace":         {copied, ""},
	"spec.securityContext":               {copied, ""},
	"spec.imagePullSecrets":              {copied, ""},
	"spec.hostname":                      {copied, ""},
	"spec.subdomain":                     {copied, ""},
	"spec.affinity.nodeAffinity":         {dropped, "selects host nodes (the leaf)"},
	"spec.affinity.podAffinity":          {copied, ""},
	"spec.affinity.podAntiAffinity":      {copied, ""},
	"spec.schedulerName":                 {dropped, "a host scheduler; the member's default scheduler places the pod"},
	"spec.tolerations":                   {changed, "`leafsync.io/*` tolerations removed: they tolerate the leaf's taints"},
	"spec.hostAliases":                   {copied, ""},
	"spec.priorityClassName":             {dropped, "a host PriorityClass"},
	"spec.priority":                      {dropped, "resolved from a host PriorityClass"},
	"spec.readinessGates":                {dropped, "their conditions are set and evaluated on the host pod"},
	"spec.runtimeClassName":              {copied, ""},
	"spec.enableServiceLinks":            {copied, ""},
	"spec.preemptionPolicy":              {dropped, "preemption among host pods"},
	"spec.overhead":                      {dropped, "set by the host's RuntimeClass admission; the member's sets its own"},
	"spec.topologySpreadConstraints":     {dropped, "spreads over host nodes and their topology"},
	"spec.setHostnameAsFQDN":             {copied, ""},
	"spec.os":                            {copied, ""},
	"spec.hostUsers":                     {copied, ""},
	"spec.schedulingGates":               {dropped, "gate the host's scheduling, done once the pod is on the leaf"},
	"spec.resourceClaims":                {copied, ""},
	"spec.resources":                     {copied, ""},
	"spec.hostnameOverride":              {copied, ""},
	"spec.schedulingGroup":               {copied, ""},
	"status":                             {dropped, "the member's kubelet writes its own; it is mirrored back (below)"},
}

// containerFields is what MemberPod does to each field of a container and
// of an init container.
var containerFields = map[string]fate{
	"volumeMounts":             {copied, "(a pod run as a member ServiceAccount: mounts of its removed `kube-api-access-*` volume are removed)"},
	"name":                     {copied, ""},
	"image":                    {copied, ""},
	"command":                  {copied, ""},
	"args":                     {copied, ""},
	"workingDir":               {copied, ""},
	"ports":                    {copied, ""},
	"envFrom":                  {copied, ""},
	"env":                      {changed, "`KUBERNETES_SERVICE_HOST` and `_PORT` added first, from the pod's token Secret (the host API server's address), unless the container sets them; only when the pod mounts a token"},
	"resources":                {copied, ""},
	"resizePolicy":             {copied, ""},
	"restartPolicy":            {copied, ""},
	"restartPolicyRules":       {copied, ""},
	"volumeDevices":            {copied, ""},
	"livenessProbe":            {copied, ""},
	"readinessProbe":           {copied, ""},
	"startupProbe":             {copied, ""},
	"lifecycle":                {copied, ""},
	"terminationMessagePath":   {copied, ""},
	"terminationMessagePolicy": {copied, ""},
	"imagePullPolicy":          {copied, ""},
	"securityContext":          {copied, ""},
	"stdin":                    {copied, ""},
	"stdinOnce":                {copied, ""},
	"tty":                      {copied, ""},
}

func init() {
	for _, list := range []string{"spec.containers[]", "spec.initContainers[]"} {
		for field, f := range containerFields {
			memberPodFields[list+"."+field] = f
			if u, ok := containerUpdateFields[field]; field == "name" {
				continue // the same container in both pods
			} else if ok {
				memberUpdateFields[list+"."+field] = u
			} else {
				memberUpdateFields[list+"."+field] = immutable
			}
		}
	}
}

// memberUpdateFields is what an update carries of each field of a host
// pod changed after its member pod was created.
var memberUpdateFields = map[string]fate{
	"metadata.labels":                    {copied, ""},
	"metadata.annotations":               {changed, "as MemberPod builds them now (a key the host removed goes, by the record of the host's keys; one the member side added stays), but `leafsync.io/owner` stays as created"},
	"spec.activeDeadlineSeconds":         {copied, ""},
	"spec.tolerations":                   {changed, "the host's new ones added and their `tolerationSeconds` taken; the member pod's others stay (the API adds tolerations, never removes one)"},
	"spec.terminationGracePeriodSeconds": {dropped, "the API lets only a negative one change (to 1); that one is carried"},
	"spec.affinity.podAffinity":          immutable,
	"spec.affinity.podAntiAffinity":      immutable,
	"spec.dnsConfig":                     immutable,
	"spec.dnsPolicy":                     immutable,
	"spec.enableServiceLinks":            immutable,
	"spec.hostAliases":                   immutable,
	"spec.hostIPC":                       immutable,
	"spec.hostNetwork":                   immutable,
	"spec.hostPID":                       immutable,
	"spec.hostUsers":                     immutable,
	"spec.hostname":                      immutable,
	"spec.hostnameOverride":              immutable,
	"spec.imagePullSecrets":              immutable,
	"spec.os":                            immutable,
	"spec.resourceClaims":                immutable,
	"spec.resources":                     {dropped, "pod-level resources change through the resize subresource, not an update"},
	"spec.restartPolicy":                 immutable,
	"spec.runtimeClassName":              immutable,
	"spec.schedulingGroup":               immutable,
	"spec.securityContext":               immutable,
	"spec.setHostnameAsFQDN":             immutable,
	"spec.shareProcessNamespace":         immutable,
	"spec.subdomain":                     immutable,
	"spec.volumes":                       immutable,
}

// immutable is the fate of a field the API refuses to change on a pod:
// the host pod cannot have a new value to carry.
var immutable = fate{dropped, "immutable on a pod (the host API refuses a change)"}

// containerUpdateFields is what an update carries of a container's and an
// init container's fields; the others are immutable.
var containerUpdateFields = map[string]fate{
	"image":     {copied, ""},
	"resources": {dropped, "through the resize subresource, not an update"},
}

// mirroredStatusFields is what podstatus.Mirror does to each field of a
// member pod's status on its way to the host pod.
var mirroredStatusFields = map[string]fate{
	"status.observedGeneration": {changed, "the host generation the member pod's spec came from, once the member's kubelet has seen it (`leafsync.io/host-generation`); the host's own until then"},
	"status.phase":              {copied, ""},
	"status.conditions":         {changed, "the member's but `DisruptionTarget` (Ready also waits for the host pod's readiness gates; observed generations are host generations), then the host's of the types the member lacks (readiness gates', the host's `DisruptionTarget`)"},
	"status.message":            {copied, ""},
	"status.reason":             {copied, ""},
	"status.nominatedNodeName":  {dropped, "the host scheduler's"},
	"status.hostIP":             {changed, "the leaf Node's address, as a kubelet on the leaf reports its own"},
	"status.hostIPs":            {changed, "the leaf Node's addresses, as a kubelet on the leaf reports its own"},
	"status.nodeAllocatableResourceClaimStatuses": {copied, ""},
	"status.podIP":                       {copied, ""},
	"status.podIPs":                      {copied, ""},
	"status.startTime":                   {copied, ""},
	"status.initContainerStatuses":       {copied, ""},
	"status.containerStatuses":           {copied, ""},
	"status.qosClass":                    {dropped, "the host's (immutable), computed from the same resources"},
	"status.ephemeralContainerStatuses":  {copied, ""},
	"status.resize":                      {dropped, "the host's own"},
	"status.resourceClaimStatuses":       {dropped, "the host's: resource claims are not synced"},
	"status.extendedResourceClaimStatus": {dropped, "the host's: resource claims are not synced"},
	"status.allocatedResources":          {copied, ""},
	"status.resources":                   {copied, ""},
}

// TestSpecFidelity round-trips a maximal host pod (every field set, by
// reflection, so that a field a Kubernetes upgrade adds fails here until
// it is classified) through MemberPod, and a maximal member pod status
// through podstatus.Mirror, and checks what happens to each field against
// the tables above — which docs/pod-sync.md shows.
func TestSpecFidelity(t *testing.T) {
	hp := maximalHostPod(t, filler{n: 1})
	before := hp.DeepCopy()
	mp, _ := MemberPod(hp, testCluster, testLeaf, testHost)
	if !equality.Semantic.DeepEqual(hp, before) {
		t.Fatal("MemberPod changed the host pod")
	}
	check(t, "MemberPod", memberPodFields, classifyPod(t, before, mp, nil))

	hostSide, memberSide := &corev1.Pod{}, &corev1.Pod{}
	fill(t, reflect.ValueOf(&hostSide.Status).Elem(), "status", filler{prefix: "host:", n: 1})
	fill(t, reflect.ValueOf(&memberSide.Status).Elem(), "status", filler{prefix: "member:", n: 2})
	// The member's kubelet has seen the spec of host generation 7.
	memberSide.Generation = 2
	memberSide.Annotations = map[string]string{podmeta.AnnotationHostGeneration: "7"}
	leaf := &corev1.Node{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.9"}}}}
	mirrored := podstatus.Mirror(hostSide, memberSide, leaf, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
	got := map[string]treatment{}
	classify(t, "status", reflect.ValueOf(memberSide.Status), reflect.ValueOf(mirrored), reflect.ValueOf(hostSide.Status), map[string]bool{"status": true}, got)
	check(t, "podstatus.Mirror", mirroredStatusFields, got)

	checkDoc(t)
}

// TestUpdateFidelity changes every field of a maximal host pod after its
// member pod was created, and checks what translate.MemberUpdate's patch
// carries to the member pod against memberUpdateFields: a field arrives
// as MemberPod would build it now (copied), stays as created (dropped), or
// arrives otherwise (changed). Fields MemberPod does not send are left
// out.
func TestUpdateFidelity(t *testing.T) {
	old := maximalHostPod(t, filler{n: 1})
	now := maximalHostPod(t, filler{prefix: "new:", n: 2})
	// The same pod: its identity, and containers known by name.
	now.Name, now.Namespace, now.UID = old.Name, old.Namespace, old.UID
	now.Spec.Containers[0].Name, now.Spec.InitContainers[0].Name = old.Spec.Containers[0].Name, old.Spec.InitContainers[0].Name
	mp, _ := MemberPod(old, testCluster, testLeaf, testHost)
	want, _ := MemberPod(now, testCluster, testLeaf, testHost)
	u := MemberUpdate(now, mp)
	if u == nil {
		t.Fatal("MemberUpdate: nothing to do for a host pod changed everywhere")
	}
	patch, err := u.Patch(mp.UID, mp.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	created, err := json.Marshal(mp)
	if err != nil {
		t.Fatal(err)
	}
	data, err := strategicpatch.StrategicMergePatch(created, patch, corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	var patched corev1.Pod
	if err := json.Unmarshal(data, &patched); err != nil {
		t.Fatal(err)
	}
	check(t, "MemberUpdate", memberUpdateFields, classifyPod(t, want, &patched, mp))
}

// maximalHostPod is a host pod with every field set, plus what makes each
// rule of MemberPod show: a second, plain volume next to the filled one
// (which projects a token) with a mount of each in every container, a
// leafsync toleration next to the filled one, and the annotations
// MemberPod removes.
func maximalHostPod(t *testing.T, f filler) *corev1.Pod {
	hp := &corev1.Pod{}
	fill(t, reflect.ValueOf(&hp.ObjectMeta).Elem(), "metadata", f)
	fill(t, reflect.ValueOf(&hp.Spec).Elem(), "spec", f)
	fill(t, reflect.ValueOf(&hp.Status).Elem(), "status", f)
	if !projectsToken(hp.Spec.Volumes[0].Projected) {
		t.Fatal("the filled volume projects no token")
	}
	hp.Spec.Volumes = append(hp.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	for _, cs := range [][]corev1.Container{hp.Spec.InitContainers, hp.Spec.Containers} {
		cs[0].VolumeMounts[0].Name = hp.Spec.Volumes[0].Name
		cs[0].VolumeMounts = append(cs[0].VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/" + f.prefix + "data"})
	}
	hp.Spec.Tolerations = append(hp.Spec.Tolerations, corev1.Toleration{Key: member.LeafsyncPrefix + "leaf", Operator: corev1.TolerationOpExists})
	hp.Annotations[corev1.LastAppliedConfigAnnotation] = "{}"
	hp.Annotations[podmeta.AnnotationMemberUID] = "m0"
	return hp
}

// filler sets every field: strings to prefix+path, numbers to n, bools to
// whether n is odd, one element per slice and map. Host and member status differ in
// prefix and n, so that where a mirrored value came from shows.
type filler struct {
	prefix string
	n      int64
}

var (
	quantityType = reflect.TypeOf(resource.Quantity{})
	timeType     = reflect.TypeOf(metav1.Time{})
	intOrStrType = reflect.TypeOf(intstr.IntOrString{})
	fieldsType   = reflect.TypeOf(metav1.FieldsV1{})
)

func fill(t *testing.T, v reflect.Value, path string, f filler) {
	t.Helper()
	if strings.Count(path, ".") > 20 {
		t.Fatalf("%s: a recursive type; the filler needs a rule for it", path)
	}
	switch v.Type() {
	case quantityType:
		v.Set(reflect.ValueOf(*resource.NewQuantity(f.n, resource.DecimalSI)))
		return
	case timeType:
		v.Set(reflect.ValueOf(metav1.NewTime(time.Date(2026, 1, 1, 0, 0, int(f.n), 0, time.UTC))))
		return
	case intOrStrType:
		v.Set(reflect.ValueOf(intstr.FromString(f.prefix + path)))
		return
	case fieldsType: // raw JSON (an ephemeral volume's template's managedFields)
		v.Set(reflect.ValueOf(*metav1.NewFieldsV1(`{"f:` + f.prefix + path + `":{}}`)))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), path, f)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if sf := v.Type().Field(i); sf.IsExported() {
				fill(t, v.Field(i), join(path, sf), f)
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0), path+"[]", f)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		key := reflect.New(v.Type().Key()).Elem()
		fill(t, key, path+"{key}", f)
		val := reflect.New(v.Type().Elem()).Elem()
		fill(t, val, path+"{}", f)
		v.SetMapIndex(key, val)
	case reflect.String:
		v.SetString(f.prefix + path)
	case reflect.Bool:
		v.SetBool(f.n%2 == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(f.n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(f.n))
	default:
		t.Fatalf("%s: the filler cannot set a %s", path, v.Kind())
	}
}

// join names a struct field by its JSON name; an inline field adds none.
func join(path string, sf reflect.StructField) string {
	name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
	switch {
	case name == "":
		return path
	case path == "":
		return name
	}
	return path + "." + name
}

// classifyPod classifies the fields of pod from in pod to (kept: the
// receiver's pod before, nil for none): metadata, spec and status, the
// fields of containers, init containers and affinity one by one.
func classifyPod(t *testing.T, from, to, kept *corev1.Pod) map[string]treatment {
	t.Helper()
	got := map[string]treatment{}
	descend := map[string]bool{"": true, "metadata": true, "spec": true, "spec.containers[]": true, "spec.initContainers[]": true, "spec.affinity": true}
	var k reflect.Value
	if kept != nil {
		k = reflect.ValueOf(*kept)
	}
	classify(t, "", reflect.ValueOf(*from), reflect.ValueOf(*to), k, descend, got)
	return got
}

// classify records the treatment of from's fields in to. kept is what the
// receiver had before (invalid: nothing, as for a new member pod); a field
// that equals it was dropped, one from holds as it is is not recorded. Paths in descend are classified field by
// field, all others as a whole.
func classify(t *testing.T, path string, from, to, kept reflect.Value, descend map[string]bool, got map[string]treatment) {
	t.Helper()
	if from.Kind() == reflect.Slice && descend[path+"[]"] && from.Len() == 1 && to.Len() == 1 {
		classify(t, path+"[]", from.Index(0), to.Index(0), index0(kept), descend, got)
		return
	}
	if descend[path] {
		switch {
		case from.Kind() == reflect.Pointer && !from.IsNil() && !to.IsNil():
			classify(t, path, from.Elem(), to.Elem(), elem(kept), descend, got)
			return
		case from.Kind() == reflect.Struct:
			for i := 0; i < from.NumField(); i++ {
				sf := from.Type().Field(i)
				var k reflect.Value
				if kept.IsValid() {
					k = kept.Field(i)
				}
				classify(t, join(path, sf), from.Field(i), to.Field(i), k, descend, got)
			}
			return
		}
	}
	sent, arrived := from.Interface(), to.Interface()
	before := reflect.Zero(from.Type()).Interface()
	if kept.IsValid() {
		before = kept.Interface()
	}
	switch {
	case equality.Semantic.DeepEqual(sent, before):
		// Nothing to carry: not recorded (check names a table row for it).
	case equality.Semantic.DeepEqual(arrived, sent):
		got[path] = copied
	case equality.Semantic.DeepEqual(arrived, before):
		got[path] = dropped
	default:
		got[path] = changed
	}
}

func elem(v reflect.Value) reflect.Value {
	if !v.IsValid() || v.IsNil() {
		return reflect.Value{}
	}
	return v.Elem()
}

func index0(v reflect.Value) reflect.Value {
	if !v.IsValid() || v.Len() == 0 {
		return reflect.Value{}
	}
	return v.Index(0)
}

// For the descended paths the table names a slice's or pointer's fields;
// a descended path recorded whole means its shape changed (an element
// removed): the table must say so for the path itself.
func check(t *testing.T, what string, want map[string]fate, got map[string]treatment) {
	t.Helper()
	for _, path := range sortedKeys(got) {
		w, ok := want[path]
		switch {
		case !ok:
			t.Errorf("%s: %s is %s, and not classified: add it with its reason to the table in fidelity_test.go (and run -update for the docs)", what, path, got[path])
		case w.treatment != got[path]:
			t.Errorf("%s: %s is %s, the table says %s (%s)", what, path, got[path], w.treatment, w.why)
		case w.treatment != copied && w.why == "":
			t.Errorf("%s: %s is %s without a reason", what, path, w.treatment)
		}
	}
	for _, path := range sortedKeys(want) {
		if _, ok := got[path]; !ok {
			t.Errorf("%s: the table names %s, which the pod no longer has or the maximal pod does not set (teach the filler)", what, path)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

const (
	fidelityDoc   = "../../../../docs/pod-sync.md"
	fidelityBegin = "<!-- BEGIN FIDELITY (generated by `go test ./internal/syncer/podsync/translate -run TestSpecFidelity -update`) -->\n"
	fidelityEnd   = "<!-- END FIDELITY -->"
)

// checkDoc: the tables of docs/pod-sync.md "Spec fidelity" are the ones
// above.
func checkDoc(t *testing.T) {
	t.Helper()
	doc, err := os.ReadFile(fidelityDoc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, fidelityBegin), strings.Index(s, fidelityEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the generated fidelity block", fidelityDoc)
	}
	want := s[:i] + fidelityBegin + fidelityTable("host pod → member pod (`translate.MemberPod`)", memberPodFields) +
		"\n" + fidelityTable("host pod changed after creation → member pod (`translate.MemberUpdate`)", memberUpdateFields) +
		"\n" + fidelityTable("member pod status → host pod status (`podstatus.Mirror`)", mirroredStatusFields) + s[j:]
	if *updateDoc {
		if err := os.WriteFile(fidelityDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != s {
		t.Errorf("%s shows stale fidelity tables: run `go test ./internal/syncer/podsync/translate -run TestSpecFidelity -update`", fidelityDoc)
	}
}

// fidelityTable is a row per field dropped or changed, then the copied
// ones and the immutable ones, a line per struct they belong to.
func fidelityTable(title string, fates map[string]fate) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| %s | | why |\n|---|---|---|\n", title)
	same, fixed := map[string][]string{}, map[string][]string{} // parent path -> field names
	for _, path := range sortedKeys(fates) {
		i := strings.LastIndex(path, ".")
		switch f := fates[path]; {
		case f.treatment == copied:
			same[path[:i]] = append(same[path[:i]], "`"+path[i+1:]+"`")
		case f == immutable:
			fixed[path[:i]] = append(fixed[path[:i]], "`"+path[i+1:]+"`")
		default:
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", path, f.treatment, f.why)
		}
	}
	for _, group := range []struct {
		title  string
		fields map[string][]string
	}{{"Copied as they are", same}, {"Dropped: " + immutable.why, fixed}} {
		if len(group.fields) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s:\n\n", group.title)
		for _, parent := range sortedKeys(group.fields) {
			fmt.Fprintf(&b, "- `%s`: %s\n", parent, strings.Join(group.fields[parent], ", "))
		}
	}
	return b.String()
}
