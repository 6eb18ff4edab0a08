package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/internal/kube"
	"github.com/flotilla-io/flotilla/internal/version"
)

// Client-side limits of flotilla's requests: high enough that no command
// waits for itself, as kubectl's.
const (
	clientQPS   = 50
	clientBurst = 100
)

// kubeconfig is the client configuration loaded the way kubectl loads it:
// --kubeconfig, else $KUBECONFIG (files separated by ':', merged), else
// ~/.kube/config; --context, else the current context.
type kubeconfig struct {
	config *rest.Config
	// namespace is the context's namespace, or default: where namespaced
	// objects are read and written when neither -n nor a document names
	// one.
	namespace string
	// context names the context in messages.
	context string
}

// kubeconfig loads the client configuration once per invocation. Loading
// reads files only: nothing is sent to the hub.
func (inv *invocation) kubeconfig() (*kubeconfig, error) {
	if inv.loaded != nil {
		return inv.loaded, nil
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: inv.kubeconfigFlag}
	if env := inv.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		rules.Precedence = filepath.SplitList(env)
	} else {
		rules.Precedence = []string{clientcmd.RecommendedHomeFile}
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: inv.kubeContext})
	cfg, err := loader.ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, errors.New("no kubeconfig to reach the hub with: give --kubeconfig FILE (the hub writes DATA/admin.kubeconfig) or set $KUBECONFIG")
	}
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	ns, _, err := loader.Namespace()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	contextName := inv.kubeContext
	if contextName == "" {
		if raw, err := loader.RawConfig(); err == nil {
			contextName = raw.CurrentContext
		}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = inv.timeout
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	cfg.UserAgent = "flotilla/" + version.Get().Flotilla
	cfg.WarningHandler = rest.NewWarningWriter(inv.Stderr, rest.WarningWriterOptions{Deduplicate: true})
	if inv.WrapTransport != nil {
		cfg.Wrap(inv.WrapTransport)
	}
	inv.loaded = &kubeconfig{config: cfg, namespace: cmp.Or(ns, defaultNamespace), context: contextName}
	return inv.loaded, nil
}

// defaultNamespace is the namespace of the kubeconfig context, for
// namespaced objects that neither -n nor a document places.
func (inv *invocation) defaultNamespace() (string, error) {
	kc, err := inv.kubeconfig()
	if err != nil {
		return "", err
	}
	return kc.namespace, nil
}

// hubClients are the clients of the hub's API server one invocation uses.
type hubClients struct {
	flotilla versioned.Interface
	kube     kubernetes.Interface
	// dynamic and mapper read and write objects of any kind: templates.
	// On a no-match error, mapper.Reset() and try once more (a CRD may be
	// new).
	dynamic dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
	// mapperFresh: discovery was read again since the last change
	// flotilla knows of, so a kind it does not know is not served.
	mapperFresh bool
}

// clients makes the clients of the hub on first use.
func (inv *invocation) clients() (*hubClients, error) {
	if inv.hub != nil {
		return inv.hub, nil
	}
	kc, err := inv.kubeconfig()
	if err != nil {
		return nil, err
	}
	c, err := kube.NewClients(kc.config)
	if err != nil {
		return nil, err
	}
	inv.hub = &hubClients{flotilla: c.Flotilla, kube: c.Kube, dynamic: c.Dynamic, mapper: c.Mapper}
	return inv.hub, nil
}

// explain rewrites an error of a request that got no answer from the hub
// into one that names the hub and says what to check. Answers of the
// hub (not found, conflict, forbidden...) are returned as they are.
func (inv *invocation) explain(err error) error {
	if err == nil || inv.loaded == nil {
		return err
	}
	server := inv.loaded.config.Host
	if apierrors.IsUnauthorized(err) {
		return &authError{server: server, context: inv.loaded.context, err: err}
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return err
	}
	var uerr *url.Error
	if !errors.As(err, &uerr) {
		return err
	}
	switch {
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("request to the hub at %s abandoned: %w", server, context.Canceled)
	case uerr.Timeout():
		return fmt.Errorf("the hub at %s did not answer within %s (raise --timeout, or check --kubeconfig and --context): %w",
			server, inv.timeout, uerr.Err)
	}
	return &connError{server: server, cause: uerr.Err, err: err}
}

// authError is a hub that did not accept the kubeconfig's credentials.
type authError struct {
	server, context string
	err             error
}

func (e *authError) Error() string {
	return fmt.Sprintf("the hub at %s refused the credentials of kubeconfig context %q (Unauthorized): check --kubeconfig and --context",
		e.server, e.context)
}

func (e *authError) Unwrap() error { return e.err }

// connError is a hub that could not be reached.
type connError struct {
	server string
	cause  error // err without the url.Error wrapping, for the message
	err    error
}

func (e *connError) Error() string {
	return fmt.Sprintf("cannot reach the hub at %s: %v (is it running? check --kubeconfig, $KUBECONFIG and --context)",
		e.server, e.cause)
}

func (e *connError) Unwrap() error { return e.err }

// getRaw reads a list (name empty) or one object of resource through rc,
// as the hub sent it: JSON, for -o json and -o yaml and for the tables.
// namespace is empty for cluster-scoped resources and for lists across
// every namespace.
func getRaw(ctx context.Context, rc rest.Interface, namespace, resource, name string) ([]byte, error) {
	req := rc.Get().Resource(resource).SetHeader("Accept", "application/json")
	if namespace != "" {
		req = req.Namespace(namespace)
	}
	if name != "" {
		req = req.Name(name)
	}
	res := req.Do(ctx)
	if err := res.Error(); err != nil { // with the message of the hub's Status
		return nil, err
	}
	return res.Raw()
}
