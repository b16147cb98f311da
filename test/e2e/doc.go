// Package e2e holds leafsync's end-to-end suites. They run real
// kube-apiserver, kube-controller-manager, kube-scheduler, etcd and kwok
// processes (built by `make tools`) and the real leafsync binary, and inject
// network faults with a real TCP proxy. Build tag: e2e. Run with `make e2e`.
package e2e
