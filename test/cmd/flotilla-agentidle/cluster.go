package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/test/membercluster"
)

// podNamespace holds the pods; its default service account exists from
// the start.
const podNamespace = metav1.NamespaceDefault

// memberClient is a fast protobuf client of the member cluster.
func memberClient(c *membercluster.Cluster) (kubernetes.Interface, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 2000, 4000
	cfg.ContentType = runtime.ContentTypeProtobuf
	return kubernetes.NewForConfig(cfg)
}

// createPods creates o.pods pods bound to the nodes round-robin, so no
// scheduler is involved, and waits until KWOK has them all Running.
func createPods(ctx context.Context, c *membercluster.Cluster, o options) error {
	client, err := memberClient(c)
	if err != nil {
		return err
	}
	start := time.Now()
	var next atomic.Int64
	errs := make([]error, o.parallel)
	var wg sync.WaitGroup
	for w := range o.parallel {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < o.pods && errs[w] == nil; i = int(next.Add(1)) - 1 {
				errs[w] = createPod(ctx, client, c.Name, i, o.nodes)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	logf("created %d pods in %v; waiting for KWOK to run them", o.pods, time.Since(start).Round(time.Second))
	for {
		running, err := countRunning(ctx, client)
		if err != nil {
			return err
		}
		if running >= o.pods {
			logf("%d pods Running %v after the first was created", running, time.Since(start).Round(time.Second))
			return nil
		}
		if !sleep(ctx, 5*time.Second) {
			return ctx.Err()
		}
	}
}

func createPod(ctx context.Context, client kubernetes.Interface, cluster string, i, nodes int) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("idle-%05d", i), Namespace: podNamespace, Labels: map[string]string{"app": "idle"}},
		Spec: corev1.PodSpec{
			NodeName: fmt.Sprintf("%s-node-%d", cluster, i%nodes+1),
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/idle:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}},
		},
	}
	for {
		_, err := client.CoreV1().Pods(podNamespace).Create(ctx, pod, metav1.CreateOptions{})
		switch {
		case err == nil || apierrors.IsAlreadyExists(err):
			return nil
		case apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err):
			if !sleep(ctx, 100*time.Millisecond) {
				return ctx.Err()
			}
		default:
			return fmt.Errorf("create pod %s: %w", pod.Name, err)
		}
	}
}

// countRunning counts the Running pods, a page at a time.
func countRunning(ctx context.Context, client kubernetes.Interface) (int, error) {
	n := 0
	opts := metav1.ListOptions{FieldSelector: "status.phase=Running", Limit: 5000}
	for {
		list, err := client.CoreV1().Pods(podNamespace).List(ctx, opts)
		if err != nil {
			return 0, fmt.Errorf("count Running pods: %w", err)
		}
		n += len(list.Items)
		if list.Continue == "" {
			return n, nil
		}
		opts.Continue = list.Continue
	}
}

// apiserverPid finds the cluster's kube-apiserver among this process's
// children by its port.
func apiserverPid(c *membercluster.Cluster) (int, error) {
	u, err := url.Parse(c.Server)
	if err != nil {
		return 0, err
	}
	want := "--secure-port=" + u.Port()
	self := strconv.Itoa(os.Getpid())
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return 0, err
	}
	for _, path := range procs {
		cmdline, err := os.ReadFile(path)
		if err != nil {
			continue // gone
		}
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) != "kube-apiserver" || !containsString(args, want) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(filepath.Dir(path), "stat"))
		if err != nil {
			continue
		}
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		if len(fields) > 1 && fields[1] == self {
			return strconv.Atoi(filepath.Base(filepath.Dir(path)))
		}
	}
	return 0, fmt.Errorf("no kube-apiserver child with %s", want)
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
