package main

import (
	"github.com/spf13/cobra"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "leafsync",
		Short: "Present member clusters as leaf nodes of a host cluster, without turning network flaps into evictions",
		Long: `leafsync runs in a host Kubernetes cluster. Each member cluster registered
through a kubeconfig Secret appears as a virtual leaf node whose capacity is the
member's aggregated resources; pods placed on a leaf run in the member.

A brief network flap never flips a leaf NotReady and never turns into pods
deleted in the member cluster: readiness is decided by hysteresis, every call to
a member goes through a circuit breaker, and stale eviction deletes are not
forwarded.`,
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(
		newRunCommand(),
		newRegisterCommand(),
		newVersionCommand(),
		newSimulateCommand(),
		newStatusCommand(),
		newDeregisterCommand(),
		newUninstallCommand(),
		newVerifyCommand(),
	)
	return root
}
