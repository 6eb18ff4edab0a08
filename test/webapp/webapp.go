// Package webapp is the workload of real nodes in tests and the demo: the
// testbin's web server image (`make testbin` packs it as web.tar), which
// answers GET / with "hello from POD on NODE" and GET /healthz with 200 on
// port 8080, and the Deployment that runs it on real nodes.
package webapp

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/flotilla-io/flotilla/test/membercluster"
)

// Image is the web server's reference; nothing pulls it.
const Image = "flotilla.test/web:1"

// Tarball is the image's file in the testbin.
const Tarball = "web.tar"

// Port is where the web server listens in its pod.
const Port = 8080

// DeploymentYAML is a Deployment of the web server, labelled app=name,
// whose pods run only on real nodes and are ready once they answer.
func DeploymentYAML(namespace, name string, replicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[2]s, namespace: %[1]s, labels: {app: %[2]s}}
spec:
  replicas: %[3]d
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec:
      nodeSelector: {%[4]s: %[5]s}
      terminationGracePeriodSeconds: 5
      containers:
        - name: web
          image: %[6]s
          imagePullPolicy: Never
          ports: [{containerPort: %[7]d}]
          readinessProbe: {httpGet: {path: /healthz, port: %[7]d}, periodSeconds: 1}
          env:
            - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
            - {name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
`, namespace, name, replicas, membercluster.NodeTypeLabel, membercluster.RealNodeType, Image, Port)
}

// Ask GETs / from the web server at a pod's IP, waiting at most timeout,
// and returns the body of a 200 (at most 4 KiB).
func Ask(podIP string, timeout time.Duration) (string, error) {
	client := http.Client{Timeout: timeout}
	resp, err := client.Get("http://" + net.JoinHostPort(podIP, strconv.Itoa(Port)) + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, body)
	}
	return string(body), nil
}
