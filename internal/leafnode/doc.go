// Package leafnode builds the leaf Node that stands for one member cluster
// in the host (aggregated capacity and allocatable, conditions, taints, node
// info, the node features every member node declares and pod sync carries)
// and renews its Lease heartbeat from the hysteresis engine's decision,
// not from the last probe's outcome.
package leafnode
