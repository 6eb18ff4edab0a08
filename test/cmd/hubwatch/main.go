// Command hubwatch watches resources of a Kubernetes API with client-go
// shared informers, as a GitOps tool or any other controller would, and
// prints one line per change: "ADDED|UPDATED|DELETED RESOURCE NAMESPACE/NAME
// RESOURCEVERSION". The end-to-end tests run it against the hub to show
// that an informer in another process sees templates, bindings and Work
// status change.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	flags := pflag.NewFlagSet("hubwatch", pflag.ContinueOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the API server")
	resources := flags.StringSlice("resource", nil, "resources to watch as RESOURCE.VERSION.GROUP (deployments.v1.apps, works.v1alpha1.flotilla.io); repeatable")
	flags.Usage = func() {
		fmt.Fprintln(os.Stderr, "Usage: hubwatch --kubeconfig FILE --resource RESOURCE.VERSION.GROUP [...]\n\nPrints one line per change seen by client-go informers.\n\nFlags:")
		flags.PrintDefaults()
	}
	if err := flags.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *resources); err != nil {
		fmt.Fprintln(os.Stderr, "hubwatch:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig string, resources []string) error {
	if len(resources) == 0 {
		return fmt.Errorf("no --resource given")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(client, 10*time.Minute)
	var mu sync.Mutex // one line at a time
	print := func(verb, resource string, obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		m, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf("%s %s %s/%s %s\n", verb, resource, m.GetNamespace(), m.GetName(), m.GetResourceVersion())
	}
	for _, r := range resources {
		gvr, _ := schema.ParseResourceArg(r)
		if gvr == nil {
			return fmt.Errorf("--resource %q: want RESOURCE.VERSION.GROUP", r)
		}
		name := strings.SplitN(r, ".", 2)[0]
		_, err := factory.ForResource(*gvr).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { print("ADDED", name, obj) },
			UpdateFunc: func(_, obj any) { print("UPDATED", name, obj) },
			DeleteFunc: func(obj any) { print("DELETED", name, obj) },
		})
		if err != nil {
			return err
		}
	}
	factory.Start(ctx.Done())
	for gvr, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer of %s did not sync", gvr)
		}
	}
	fmt.Println("SYNCED")
	<-ctx.Done()
	factory.Shutdown()
	return nil
}
