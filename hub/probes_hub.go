package hub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/store"
)

// readinessProbes are the hub's /readyz checks: it can serve agents and
// operators only with its store reachable, its API server ready, its
// informers synced and its QUIC listener accepting.
func readinessProbes(s *store.Store, kube kubernetes.Interface, informers *controller.Informers, quicServing func() bool) []probe {
	synced := map[string]cache.InformerSynced{
		"clusters": informers.Clusters.Informer().HasSynced, "bindings": informers.Bindings.Informer().HasSynced,
		"clusterbindings": informers.ClusterBindings.Informer().HasSynced, "works": informers.Works.Informer().HasSynced,
		"policies": informers.Policies.Informer().HasSynced, "clusterpolicies": informers.ClusterPolicies.Informer().HasSynced,
	}
	return []probe{
		storeProbe(s),
		{name: "kube-apiserver", check: func(ctx context.Context) error {
			body, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			if err != nil {
				return fmt.Errorf("embedded API server not ready: %w: %s", err, strings.TrimSpace(string(body)))
			}
			return nil
		}},
		{name: "informers-synced", check: func(context.Context) error {
			var waiting []string
			for name, hasSynced := range synced {
				if !hasSynced() {
					waiting = append(waiting, name)
				}
			}
			if len(waiting) > 0 {
				slices.Sort(waiting)
				return fmt.Errorf("informers not synced yet: %s", strings.Join(waiting, ", "))
			}
			return nil
		}},
		{name: "quic-listener", check: func(context.Context) error {
			if !quicServing() {
				return errors.New("not accepting agent connections")
			}
			return nil
		}},
	}
}

// storeProbe checks that etcd answers a linearizable read, which needs a
// quorum, as etcdctl endpoint health does.
func storeProbe(s *store.Store) probe {
	return probe{name: "etcd", check: func(ctx context.Context) error {
		if _, err := s.Client().Get(ctx, "health", clientv3.WithCountOnly()); err != nil {
			return fmt.Errorf("store not reachable: %w", err)
		}
		return nil
	}}
}
