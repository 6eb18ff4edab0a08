// Command pause is the sandbox process of the test clusters' real nodes
// (`make testbin` packages it as registry.k8s.io/pause:3.10, so no image is
// pulled): it holds the pod's namespaces open, reaps the zombies of a pod
// that shares its process namespace, and exits on SIGINT or SIGTERM, as
// Kubernetes' pause does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			return
		}
		reap()
	}
}

// reap waits for every child that has ended, without blocking.
func reap() {
	for {
		pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
