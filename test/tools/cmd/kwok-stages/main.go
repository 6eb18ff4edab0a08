// Command kwok-stages prints the KWOK stage configuration used by the member
// test clusters: node initialise and heartbeat, pod ready, complete and delete.
// The stages come from the KWOK module itself, so they match the kwok binary.
package main

import (
	"fmt"
	"os"
	"strings"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

func main() {
	stages := []string{
		nodefast.DefaultNodeInit,
		nodeheartbeat.DefaultNodeHeartbeat,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	var out strings.Builder
	for _, s := range stages {
		out.WriteString("---\n")
		out.WriteString(strings.TrimPrefix(strings.TrimSpace(s), "---\n"))
		out.WriteString("\n")
	}
	if _, err := os.Stdout.WriteString(out.String()); err != nil {
		fmt.Fprintln(os.Stderr, "kwok-stages:", err)
		os.Exit(1)
	}
}
