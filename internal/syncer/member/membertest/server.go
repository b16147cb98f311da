// Package membertest provides a minimal member API server for tests: TLS
// with HTTP/2, bearer-token authentication, /readyz, and list+watch
// (including watch-list streaming) of Nodes and Pods. It is enough for a
// member runtime's informers to sync and its prober to probe; it is not a
// Kubernetes API server.
package membertest

import (
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Server is a fake member API server.
type Server struct {
	srv       *httptest.Server
	readyCode atomic.Int32
	requests  atomic.Int64
	userAgent atomic.Value
	token     atomic.Value

	mu         sync.Mutex
	nodes      []corev1.Node
	pods       []corev1.Pod
	watches    int
	identity   string
	configMaps map[string]*corev1.ConfigMap // by namespace/name
}

// NewServer starts a server holding nodes and pods; it accepts the bearer
// token "token" (see SetToken). It is closed when the test ends.
func NewServer(t testing.TB, nodes []corev1.Node, pods []corev1.Pod) *Server {
	t.Helper()
	s := &Server{nodes: nodes, pods: pods, identity: "member-" + t.Name(), configMaps: map[string]*corev1.ConfigMap{}}
	s.readyCode.Store(http.StatusOK)
	s.token.Store("token")
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.EnableHTTP2 = true
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the server's https:// URL.
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// CAData is the PEM of the server's certificate.
func (s *Server) CAData() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
}

// RESTConfig returns a client config with the current token.
func (s *Server) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            s.srv.URL,
		BearerToken:     s.Token(),
		TLSClientConfig: rest.TLSClientConfig{CAData: s.CAData()},
	}
}

// Kubeconfig returns a kubeconfig with inline CA and the given token.
func (s *Server) Kubeconfig(token string) []byte {
	cfg := clientcmdapi.NewConfig()
	c := clientcmdapi.NewCluster()
	c.Server = s.srv.URL
	c.CertificateAuthorityData = s.CAData()
	u := clientcmdapi.NewAuthInfo()
	u.Token = token
	ctx := clientcmdapi.NewContext()
	ctx.Cluster, ctx.AuthInfo = "member", "leafsync"
	cfg.Clusters["member"] = c
	cfg.AuthInfos["leafsync"] = u
	cfg.Contexts["member"] = ctx
	cfg.CurrentContext = "member"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		panic(err)
	}
	return data
}

// SetReady sets the status code /readyz answers.
func (s *Server) SetReady(code int) { s.readyCode.Store(int32(code)) }

// SetToken sets the only bearer token accepted; others get 401.
func (s *Server) SetToken(token string) { s.token.Store(token) }

// Token returns the accepted bearer token.
func (s *Server) Token() string { return s.token.Load().(string) }

// Requests counts the requests served.
func (s *Server) Requests() int64 { return s.requests.Load() }

// UserAgent is the user agent of the last request.
func (s *Server) UserAgent() string {
	v, _ := s.userAgent.Load().(string)
	return v
}

// OpenWatches is the number of watches in progress.
func (s *Server) OpenWatches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watches
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	s.userAgent.Store(r.UserAgent())
	if r.Header.Get("Authorization") != "Bearer "+s.Token() {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure, Message: "Unauthorized", Reason: metav1.StatusReasonUnauthorized, Code: 401,
		})
		return
	}
	switch r.URL.Path {
	case "/readyz":
		code := int(s.readyCode.Load())
		w.WriteHeader(code)
		if code == http.StatusOK {
			_, _ = w.Write([]byte("ok"))
		} else {
			_, _ = w.Write([]byte("[-]etcd failed: reason withheld\nreadyz check failed"))
		}
	case "/api/v1/nodes":
		s.mu.Lock()
		items := copies(s.nodes, "Node")
		s.mu.Unlock()
		s.listOrWatch(w, r, "NodeList", items, &corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}})
	case "/api/v1/pods":
		s.mu.Lock()
		items := copies(s.pods, "Pod")
		s.mu.Unlock()
		s.listOrWatch(w, r, "PodList", items, &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}})
	case "/api/v1/namespaces/kube-system":
		s.mu.Lock()
		ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: types.UID(s.identity)}}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, ns)
	case "/api/v1/namespaces":
		writeJSON(w, http.StatusCreated, &corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"}})
	default:
		if s.configMap(w, r) {
			return
		}
		http.NotFound(w, r)
	}
}

// SetIdentity sets the UID of the kube-system namespace (the cluster's
// identity; the test's name by default).
func (s *Server) SetIdentity(uid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.identity = uid
}

// ConfigMap returns a ConfigMap created in the server (nil if none).
func (s *Server) ConfigMap(namespace, name string) *corev1.ConfigMap {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.configMaps[namespace+"/"+name]
}

// configMap serves get, create and delete of ConfigMaps (leafsync's
// member claim); it reports whether the request was one.
func (s *Server) configMap(w http.ResponseWriter, r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/namespaces/")
	if !ok {
		return false
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 2 || parts[1] != "configmaps" {
		return false
	}
	ns := parts[0]
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && len(parts) == 2:
		body, _ := io.ReadAll(r.Body)
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		cm, ok := obj.(*corev1.ConfigMap)
		if err != nil || !ok {
			writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest)
			return true
		}
		key := ns + "/" + cm.Name
		if s.configMaps[key] != nil {
			writeStatus(w, http.StatusConflict, metav1.StatusReasonAlreadyExists)
			return true
		}
		cm.Namespace, cm.UID, cm.TypeMeta = ns, types.UID("cm-"+cm.Name), metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"}
		s.configMaps[key] = cm
		writeJSON(w, http.StatusCreated, cm)
	case len(parts) == 3:
		key := ns + "/" + parts[2]
		cm := s.configMaps[key]
		if cm == nil {
			writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound)
			return true
		}
		if r.Method == http.MethodDelete {
			delete(s.configMaps, key)
			writeJSON(w, http.StatusOK, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
			return true
		}
		writeJSON(w, http.StatusOK, cm)
	default:
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, obj any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(obj)
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason) {
	writeJSON(w, code, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Reason: reason, Code: int32(code), Message: string(reason)})
}

const resourceVersion = "100"

func (s *Server) listOrWatch(w http.ResponseWriter, r *http.Request, listKind string, items []runtime.Object, bookmark metav1.Object) {
	q := r.URL.Query()
	if q.Get("watch") != "true" && q.Get("watch") != "1" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"kind": listKind, "apiVersion": "v1",
			"metadata": map[string]any{"resourceVersion": resourceVersion},
			"items":    items,
		})
		return
	}
	s.mu.Lock()
	s.watches++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.watches--
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	if q.Get("sendInitialEvents") == "true" {
		for _, it := range items {
			_ = enc.Encode(map[string]any{"type": "ADDED", "object": it})
		}
		bookmark.SetResourceVersion(resourceVersion)
		bookmark.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": bookmark})
	}
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// copies returns deep copies of objs with their kind set, for a list or a
// watch.
func copies[T any, PT interface {
	*T
	runtime.Object
}](objs []T, kind string) []runtime.Object {
	out := make([]runtime.Object, len(objs))
	for i := range objs {
		o := PT(&objs[i]).DeepCopyObject()
		o.GetObjectKind().SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
		out[i] = o
	}
	return out
}
