// Command pause is the sandbox ("pause") container of the test node's
// pods: it holds the pod's namespaces and waits for a signal. It is built
// here, like leafsync's image, so that the node never pulls an image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}
