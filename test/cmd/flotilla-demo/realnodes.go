package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/test/membercluster"
	"github.com/flotilla-io/flotilla/test/webapp"
)

// realClusters are the demo's clusters that get a real node (kubelet,
// containerd, kube-proxy) beside their KWOK nodes, to run helloExample.
var realClusters = []string{"member-1", "member-2"}

// helloExample is a web server that really runs: 3 replicas divided 1:2
// over the real nodes of member-1 and member-2, like nginx.
var helloExample = webapp.DeploymentYAML("default", "hello", 3) + `---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: hello-propagation, namespace: default}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: hello}]
  placement:
    clusterAffinity: {clusterNames: [member-1, member-2]}
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
          - {targetCluster: {clusterNames: [member-1]}, weight: 1}
          - {targetCluster: {clusterNames: [member-2]}, weight: 2}
`

// useRealNodes decides --real-nodes: auto uses them when the machine can
// (root, containerd, runc, the CNI plugins, the testbin's kubelet), and
// says what is missing otherwise; on requires them; off never.
func useRealNodes(mode string) (bool, error) {
	if mode == "off" {
		return false, nil
	}
	binDir, err := membercluster.FindBinDir()
	if err == nil {
		err = membercluster.CheckRealNodes(binDir)
	}
	if err == nil {
		_, err = os.Stat(filepath.Join(binDir, webapp.Tarball))
	}
	switch {
	case err == nil:
		return true, nil
	case mode == "on":
		return false, fmt.Errorf("--real-nodes on: %w", err)
	default:
		say("no real nodes, only KWOK ones (--real-nodes auto): %v", err)
		return false, nil
	}
}

// demoSpecs are the member clusters: realClusters get a real node beside
// their KWOK nodes when real is set.
func demoSpecs(n int, real bool) []membercluster.ClusterSpec {
	specs := membercluster.Specs(n)
	for i := range specs {
		if real && slices.Contains(realClusters, specs[i].Name) {
			specs[i].Nodes, specs[i].RealNodes = membercluster.DefaultNodes, 1
		}
	}
	return specs
}

// applyHello writes helloExample to DIR/hello.yaml and applies it.
func applyHello(ctx context.Context, dir, cli, kubeconfig string) error {
	path := filepath.Join(dir, "hello.yaml")
	if err := os.WriteFile(path, []byte(helloExample), 0o644); err != nil {
		return err
	}
	say("propagating a web server to the real nodes: flotilla apply -f %s", path)
	apply := exec.CommandContext(ctx, cli, "--kubeconfig", kubeconfig, "apply", "-f", path)
	apply.Stdout, apply.Stderr = os.Stdout, os.Stderr
	if err := retry(ctx, apply); err != nil {
		return fmt.Errorf("apply %s: %w", path, err)
	}
	return nil
}

// webTarball is the web server image in the testbin.
func webTarball() []string {
	binDir, err := membercluster.FindBinDir()
	if err != nil {
		return nil
	}
	return []string{filepath.Join(binDir, webapp.Tarball)}
}

// printHello lists hello's pods on the real nodes and what each answers
// when asked (pods are reachable by IP from this machine).
func printHello(ctx context.Context, out io.Writer, clients map[string]kubernetes.Interface) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CLUSTER\tPOD\tNODE\tIP\tPHASE\tANSWER TO GET /")
	for _, cluster := range realClusters {
		client := clients[cluster]
		if client == nil {
			continue
		}
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=hello"})
		if err != nil {
			fmt.Fprintf(w, "%s\t(unreachable: %v)\t\t\t\t\n", cluster, err)
			continue
		}
		for _, p := range pods.Items {
			answer := "-"
			if p.Status.PodIP != "" {
				answer = ask(p.Status.PodIP)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", cluster, p.Name, p.Spec.NodeName, p.Status.PodIP, p.Status.Phase, answer)
		}
	}
	_ = w.Flush()
}

// ask is the first line of what the web server at podIP answers, or "no
// answer".
func ask(podIP string) string {
	body, err := webapp.Ask(podIP, time.Second)
	if err != nil {
		return "no answer"
	}
	return strings.TrimSpace(strings.SplitN(body, "\n", 2)[0])
}
