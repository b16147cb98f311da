// Command leafsync is the leafsync cluster-manager: it presents member
// clusters as leaf nodes of a host cluster and keeps brief network flaps
// from turning into NotReady leaves or deleted member pods.
package main

import (
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
