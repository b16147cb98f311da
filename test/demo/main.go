// Command demo starts, on this machine, what leafsync manages: a host
// cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// a kwok worker) and two member clusters with kwok nodes and running pods.
// It prints their kubeconfigs and tears everything down on Ctrl-C.
//
// Run it with `make demo`, which first builds the control-plane binaries.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/leafsync/leafsync/test/harness"
)

func main() {
	env := &demoEnv{}
	code := 0
	func() {
		defer env.teardown()
		defer func() {
			if r := recover(); r != nil && r != errFatal {
				panic(r)
			} else if r != nil {
				code = 1
			}
		}()
		code = run(env)
	}()
	os.Exit(code)
}

func run(env *demoEnv) int {
	start := time.Now()
	fmt.Println("demo: starting a host and two member clusters (real kube-apiserver, KCM, etcd, kwok)...")
	host := harness.StartHost(env, harness.HostOptions{})
	members := []*harness.Cluster{
		harness.StartMember(env, harness.MemberOptions{Name: "member-a", Nodes: 3, Pods: 4}),
		harness.StartMember(env, harness.MemberOptions{Name: "member-b", Nodes: 2, Pods: 2}),
	}
	fmt.Printf("demo: up in %s\n\n", time.Since(start).Round(time.Second))
	for _, c := range append([]*harness.Cluster{host}, members...) {
		path, err := c.WriteKubeconfig()
		if err != nil {
			env.Fatalf("%v", err)
		}
		fmt.Printf("  %-9s %s\n            kubectl --kubeconfig %s get nodes,pods -A\n", c.Name, c.URL(), path)
	}
	fmt.Printf("\ndemo: process logs are in %s\n", filepath.Dir(host.Dir))
	fmt.Println("demo: press Ctrl-C to tear everything down")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	fmt.Println("\ndemo: tearing down")
	return 0
}

var errFatal = fmt.Errorf("demo: fatal")

// demoEnv satisfies harness.TB outside a test.
type demoEnv struct {
	cleanups []func()
	failed   bool
}

func (*demoEnv) Helper()      {}
func (*demoEnv) Name() string { return "demo" }
func (*demoEnv) Logf(format string, args ...any) {
	fmt.Printf(format+"\n", args...)
}
func (e *demoEnv) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "demo: "+format+"\n", args...)
	e.failed = true
	panic(errFatal)
}
func (e *demoEnv) Failed() bool     { return e.failed }
func (e *demoEnv) Cleanup(f func()) { e.cleanups = append(e.cleanups, f) }
func (e *demoEnv) teardown() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}
