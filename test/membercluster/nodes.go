package membercluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// kwokNodeAnnotation marks the nodes KWOK manages. The nodes carry no KWOK
// taint, so ordinary workloads run on them without tolerations.
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// apiserverReady asks the API server's /readyz.
func (c *Cluster) apiserverReady(ctx context.Context) error {
	client, err := c.Clientset()
	if err != nil {
		return err
	}
	body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("readyz: %w (%s)", err, body)
	}
	return nil
}

// waitWorkloadReady creates the fake nodes, then waits until KWOK reports
// them (and the kubelets their real nodes) Ready and the controller-manager made the default service account,
// which Pod admission needs.
func (c *Cluster) waitWorkloadReady(ctx context.Context) error {
	client, err := c.Clientset()
	if err != nil {
		return err
	}
	for i := range c.spec.Nodes {
		node := fakeNode(fmt.Sprintf("%s-node-%d", c.Name, i+1), c.spec)
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", node.Name, err)
		}
	}
	start := time.Now()
	var waitingFor string
	err = wait.PollUntilContextTimeout(ctx, readyPollPeriod, readyTimeout, true, func(ctx context.Context) (bool, error) {
		waitingFor, err = workloadNotReady(ctx, client, c.spec.Nodes+c.spec.RealNodes)
		if err != nil {
			return false, err
		}
		for _, p := range c.processes() {
			if p.HasExited() {
				return false, p.ExitError()
			}
		}
		return waitingFor == "", nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w (logs in %s)", waitingFor, err, c.dir)
	}
	c.logger.Debug("nodes ready", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// workloadNotReady says what still keeps the cluster from running Pods, or
// "" once nothing does. Transient API errors count as not ready yet.
func workloadNotReady(ctx context.Context, client kubernetes.Interface, wantNodes int) (string, error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "node list", nil
	}
	ready := 0
	for _, node := range nodes.Items {
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	if ready < wantNodes {
		return fmt.Sprintf("%d of %d nodes Ready", ready, wantNodes), nil
	}
	if _, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{}); err != nil {
		return "the default service account", nil
	}
	return "", nil
}

// fakeNode is a node KWOK will manage, with the spec's allocatable resources.
func fakeNode(name string, spec ClusterSpec) *corev1.Node {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(spec.NodeCPU),
		corev1.ResourceMemory: resource.MustParse(spec.NodeMemory),
		corev1.ResourcePods:   resource.MustParse(spec.NodePods),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokNodeAnnotation: "fake"},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Status: corev1.NodeStatus{Capacity: resources, Allocatable: resources},
	}
}
