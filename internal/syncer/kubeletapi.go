package syncer

import (
	"fmt"
	"net"
	"strconv"

	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/leafsync/leafsync/internal/syncer/clusters"
	"github.com/leafsync/leafsync/internal/syncer/config"
	"github.com/leafsync/leafsync/internal/syncer/kubeletapi"
)

// setupKubeletAPI serves the leaves' kubelet API and advertises it on
// them (docs/kubelet-api.md), when kubeletAPI.enabled.
func setupKubeletAPI(mgr manager.Manager, cfg config.Config, reg *clusters.Registry, nodes coreinformers.NodeInformer) error {
	k := cfg.KubeletAPI
	if !k.Enabled {
		return nil
	}
	host, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("host client for the kubelet API: %w", err)
	}
	srv, err := kubeletapi.New(kubeletapi.Options{
		Host:                          host,
		Leaves:                        nodes.Lister(),
		Members:                       reg,
		BindAddress:                   net.JoinHostPort("", strconv.Itoa(int(k.Port))),
		CertFile:                      k.CertFile,
		KeyFile:                       k.KeyFile,
		Hosts:                         []string{k.Address()},
		ConnectTimeout:                k.ConnectTimeout.Duration,
		HandshakeTimeout:              k.HandshakeTimeout.Duration,
		RequestTimeout:                k.RequestTimeout.Duration,
		IdleTimeout:                   k.IdleTimeout.Duration,
		MaxUnauthenticatedConnections: int(k.MaxUnauthenticatedConnections),
		Logger:                        mgr.GetLogger(),
		Sharded:                       reg.Sharded(),
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(srv); err != nil {
		return err
	}
	a := &kubeletapi.Advertiser{
		Host: host, Informer: nodes.Informer(), Address: k.Address(), Port: k.Port, Logger: mgr.GetLogger(),
	}
	if reg.Sharded() {
		// Each replica serves, and advertises itself on, its members' leaves.
		a.Acting = reg.Acting
	}
	return mgr.Add(a)
}
