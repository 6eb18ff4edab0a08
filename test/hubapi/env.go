package hubapi

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// Env is a running API server with Flotilla's CRDs installed, and admin
// clients for it. Tests share it: see the package doc for what that means.
type Env struct {
	// Server is the API server's URL, https://127.0.0.1:PORT.
	Server string
	// Kubeconfig is the path of an admin kubeconfig (a client certificate
	// in system:masters), for tools and child processes.
	Kubeconfig string
	// Dir holds the kubeconfig, the certificates, etcd's data and the logs
	// of etcd and kube-apiserver (Dir/etcd.log, Dir/hub/kube-apiserver.log).
	// It is removed when Main stops the server.
	Dir string

	// Flotilla, Kube and Dynamic are clients acting as admin, with the
	// client-side rate limits of RESTConfig.
	Flotilla versioned.Interface
	Kube     kubernetes.Interface
	Dynamic  dynamic.Interface

	config *rest.Config
	// cleaner deletes what tests leave, without the deprecation warnings
	// of the resources it lists (v1 Endpoints).
	cleaner dynamic.Interface
	// clusterKinds are the resources of Flotilla's cluster-scoped kinds,
	// which Cleanup empties.
	clusterKinds []schema.GroupVersionResource
	servers      *membercluster.Environment
}

// RESTConfig returns a new copy of the admin client configuration (QPS 500,
// Burst 1000), which the caller may change.
func (e *Env) RESTConfig() *rest.Config { return rest.CopyConfig(e.config) }

// AsUser returns a client configuration that impersonates user in groups,
// for tests of what RBAC lets a non-admin do (authenticated users are in
// system:authenticated by default; with no Role bound they may do nearly
// nothing).
func (e *Env) AsUser(user string, groups ...string) *rest.Config {
	cfg := e.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg
}
