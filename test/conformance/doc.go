// Package conformance runs the upstream Kubernetes [Conformance] specs that
// a node answers for (pods, volumes from ConfigMaps and Secrets, the
// downward API, probes, hooks, security contexts, kubectl logs and exec)
// through a leaf, and writes their report. `make conformance` runs it; its
// test carries the build tag conformance, as it needs root, a real kubelet
// node and the suite built by build.sh. docs/conformance/README.md says how
// it runs and what it found.
package conformance
