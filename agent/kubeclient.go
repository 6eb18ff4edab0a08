package agent

import (
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/agent/clusterstatus"
	"github.com/flotilla-io/flotilla/agent/ownerref"
)

// kubeClients are the member cluster clients: a typed one, a dynamic one
// for the Works' objects of any kind, and a typed one speaking protobuf for
// the node and pod watches (nil: kube; see clusterstatus.NewWatchClient);
// and the owner of the objects the agent makes for itself (nil: none),
// shared by every agent the process runs so that it is read once.
type kubeClients struct {
	kube    kubernetes.Interface
	dynamic dynamic.Interface
	watch   kubernetes.Interface
	owner   *ownerref.Owner
}

// newKubeClients builds the member cluster clients from cfg.Kubeconfig, or
// from the in-cluster service account when it is empty.
func newKubeClients(cfg Config) (kubeClients, error) {
	rc, err := restConfig(cfg.Kubeconfig)
	if err != nil {
		return kubeClients{}, err
	}
	rc.QPS, rc.Burst = cfg.KubeQPS, cfg.KubeBurst
	rc.UserAgent = "flotilla-agent"
	if cfg.Version != "" {
		rc.UserAgent += "/" + cfg.Version
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return kubeClients{}, fmt.Errorf("member cluster client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return kubeClients{}, fmt.Errorf("member cluster dynamic client: %w", err)
	}
	watch, err := clusterstatus.NewWatchClient(rc)
	if err != nil {
		return kubeClients{}, fmt.Errorf("member cluster watch client: %w", err)
	}
	owner := ownerref.New(client, cfg.SystemNamespace, cfg.OwnerServiceAccount, cfg.Logger.With("cluster", cfg.ClusterName), clock.RealClock{})
	return kubeClients{kube: client, dynamic: dyn, watch: watch, owner: owner}, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no kubeconfig given and not running in a cluster: %w", err)
		}
		return rc, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	return rc, nil
}
