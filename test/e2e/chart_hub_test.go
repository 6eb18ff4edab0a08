package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-io/flotilla/hub/podlabel"
	"github.com/flotilla-io/flotilla/test/freeport"
	"github.com/flotilla-io/flotilla/test/membercluster"
	"github.com/flotilla-io/flotilla/test/podrun"
)

// hubDataDir is where the chart mounts the hub's data volume.
const hubDataDir = "/var/lib/flotilla"

// TestHubChartRender checks what charts/flotilla-hub renders, without a
// cluster: the agents' UDP Service and the API's TCP Service, a one-replica
// StatefulSet whose data volume holds --data-dir, probes on /livez and /readyz, a
// hardened pod, and schema errors for bad values.
func TestHubChartRender(t *testing.T) {
	tests := []struct {
		name    string
		sets    []string
		wantErr []string
		check   func(t *testing.T, objs []*unstructured.Unstructured)
	}{
		{name: "defaults: services", check: checkHubServices},
		{name: "defaults: statefulset with a data volume claim", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			sts := hubStatefulSet(t, objs)
			if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 1 || sts.Spec.PodManagementPolicy != appsv1.OrderedReadyPodManagement {
				t.Errorf("StatefulSet replicas %v, %s; want 1, OrderedReady", sts.Spec.Replicas, sts.Spec.PodManagementPolicy)
			}
			if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Name != "data" {
				t.Fatalf("volumeClaimTemplates %+v, want one named data", sts.Spec.VolumeClaimTemplates)
			}
			checkHubDataMount(t, sts)
			checkHardenedPod(t, sts.Spec.Template.Spec)
			ctr := sts.Spec.Template.Spec.Containers[0]
			for name, want := range map[string]struct {
				probe *corev1.Probe
				path  string
			}{"startup": {ctr.StartupProbe, "/livez"}, "liveness": {ctr.LivenessProbe, "/livez"}, "readiness": {ctr.ReadinessProbe, "/readyz"}} {
				if probe := want.probe; probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want.path || probe.HTTPGet.Port != intstr.FromString("http") {
					t.Errorf("%s probe %+v, want GET %s on port http", name, probe, want.path)
				}
			}
			if sts.Spec.Template.Spec.AutomountServiceAccountToken == nil || *sts.Spec.Template.Spec.AutomountServiceAccountToken {
				t.Error("the hub pod mounts a service-account token it does not need")
			}
		}},
		{name: "no persistence: an emptyDir", sets: []string{"persistence.enabled=false"}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			sts := hubStatefulSet(t, objs)
			if len(sts.Spec.VolumeClaimTemplates) != 0 {
				t.Errorf("volumeClaimTemplates %+v with persistence off", sts.Spec.VolumeClaimTemplates)
			}
			checkHubDataMount(t, sts)
		}},
		{name: "no CRDs in the hosting cluster", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, o := range objs {
				if o.GetKind() == "CustomResourceDefinition" {
					t.Errorf("renders CRD %s", o.GetName())
				}
			}
		}},
		{name: "replicas on external etcd", sets: []string{"replicas=3", "etcd.endpoints={https://etcd-0:2379,https://etcd-1:2379}"}, check: checkHubReplicas},
		{name: "replicas, agents on every replica", sets: []string{"replicas=3", "etcd.endpoints={https://etcd-0:2379}", "agentService.everyReplica=true"}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			var agents corev1.Service
			findObject(t, objs, "Service", "flotilla-hub-agents", &agents)
			if _, ok := agents.Spec.Selector["flotilla.io/hub-leader"]; ok {
				t.Errorf("the agents Service selects %v, want every replica", agents.Spec.Selector)
			}
		}},
		{name: "defaults: the HTTP endpoint over TLS", check: checkHubHTTPTLS(true)},
		{name: "HTTP endpoint without TLS", sets: []string{"hub.httpTLS=false"}, check: checkHubHTTPTLS(false)},
		{name: "defaults: agents keep their source addresses", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			var agents corev1.Service
			findObject(t, objs, "Service", "flotilla-hub-agents", &agents)
			if agents.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
				t.Errorf("agents Service externalTrafficPolicy %q, want Local", agents.Spec.ExternalTrafficPolicy)
			}
		}},
		{name: "defaults: a NetworkPolicy", check: checkHubNetworkPolicy(false)},
		{name: "NetworkPolicy of replicas, API limited", sets: []string{"replicas=2", "etcd.endpoints={https://etcd-0:2379}",
			"networkPolicy.apiFrom[0].ipBlock.cidr=192.0.2.0/24"}, check: checkHubNetworkPolicy(true)},
		{name: "no NetworkPolicy", sets: []string{"networkPolicy.enabled=false"}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, o := range objs {
				if o.GetKind() == "NetworkPolicy" {
					t.Errorf("renders NetworkPolicy %s with networkPolicy.enabled=false", o.GetName())
				}
			}
		}},
		{name: "ServiceMonitor scrapes HTTPS", sets: []string{"metrics.serviceMonitor.enabled=true"}, check: checkHubServiceMonitor(`{"insecureSkipVerify":true}`)},
		{name: "ServiceMonitor verifies with a CA", sets: []string{"metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.insecureSkipVerify=false",
			"metrics.serviceMonitor.tlsConfig.ca.secret.name=hub-ca", "metrics.serviceMonitor.tlsConfig.ca.secret.key=ca.crt"},
			check: checkHubServiceMonitor(`{"ca":{"secret":{"key":"ca.crt","name":"hub-ca"}},"insecureSkipVerify":false}`)},
		{name: "ServiceMonitor tlsConfig cannot skip verification on its own", sets: []string{"metrics.serviceMonitor.tlsConfig.insecureSkipVerify=true"},
			wantErr: []string{"/metrics/serviceMonitor/tlsConfig"}},
		{name: "bad NetworkPolicy peer", sets: []string{"networkPolicy.httpFrom[0].cidr=0.0.0.0/0"}, wantErr: []string{"/networkPolicy/httpFrom/0"}},
		{name: "replicas on the embedded etcd", sets: []string{"replicas=2"}, wantErr: []string{"replicas > 1 needs etcd.endpoints"}},
		{name: "no replicas", sets: []string{"replicas=0"}, wantErr: []string{"/replicas"}},
		{name: "bad CSR approval mode", sets: []string{"hub.agentCSRApproval=sometimes"}, wantErr: []string{"/hub/agentCSRApproval"}},
		{name: "bad agent service type", sets: []string{"agentService.type=Magic"}, wantErr: []string{"/agentService/type"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := renderChart(t, "charts/flotilla-hub", "flotilla-hub", "flotilla-hub", tc.sets)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("rendered, want an error mentioning %q", tc.wantErr)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error does not mention %q:\n%v", want, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, decodeManifests(t, out))
		})
	}
}

// checkHubReplicas: three replicas start together, label the leader's
// pod (their own downward-API names, a token, a Role on exactly their
// pods), and the agents Service selects the labelled leader while the API
// Service selects every replica.
func checkHubReplicas(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	sts := hubStatefulSet(t, objs)
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 || sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("StatefulSet replicas %v, %s; want 3, Parallel", sts.Spec.Replicas, sts.Spec.PodManagementPolicy)
	}
	pod := sts.Spec.Template.Spec
	ctr := pod.Containers[0]
	for _, want := range []string{"--label-leader-pod", "--etcd-endpoints=https://etcd-0:2379,https://etcd-1:2379",
		"--gossip-addr=0.0.0.0:7946", "--gossip-advertise-addr=[$(POD_IP)]:7946", "--gossip-join=flotilla-hub-headless.flotilla-hub.svc:7946", "--gossip-interval=1s"} {
		if !slices.Contains(ctr.Args, want) {
			t.Errorf("args %q lack %s", ctr.Args, want)
		}
	}
	fields := map[string]string{}
	for _, e := range ctr.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			fields[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if diff := cmp.Diff(map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace", "POD_IP": "status.podIP"}, fields); diff != "" {
		t.Errorf("downward-API env (-want +got):\n%s", diff)
	}
	if pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
		t.Error("replicas get no service-account token to label their pods with")
	}
	var agents, api corev1.Service
	findObject(t, objs, "Service", "flotilla-hub-agents", &agents)
	findObject(t, objs, "Service", "flotilla-hub", &api)
	if agents.Spec.Selector["flotilla.io/hub-leader"] != "true" {
		t.Errorf("the agents Service selects %v, want the leader label too", agents.Spec.Selector)
	}
	if _, ok := api.Spec.Selector["flotilla.io/hub-leader"]; ok || !cmpLabels(api.Spec.Selector, sts.Spec.Template.Labels) {
		t.Errorf("the API Service selects %v, want every replica", api.Spec.Selector)
	}
	var role rbacv1.Role
	findObject(t, objs, "Role", "flotilla-hub-leader-label", &role)
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"},
		ResourceNames: []string{"flotilla-hub-0", "flotilla-hub-1", "flotilla-hub-2"}}}
	if diff := cmp.Diff(want, role.Rules); diff != "" {
		t.Errorf("Role rules (-want +got):\n%s", diff)
	}
	var binding rbacv1.RoleBinding
	findObject(t, objs, "RoleBinding", "flotilla-hub-leader-label", &binding)
	if len(binding.Subjects) != 1 || binding.Subjects[0].Name != pod.ServiceAccountName || binding.RoleRef.Name != role.Name {
		t.Errorf("RoleBinding %+v, want the hub's ServiceAccount %s bound to %s", binding, pod.ServiceAccountName, role.Name)
	}
}

// installHubChart renders charts/flotilla-hub with sets, applies it to the
// member cluster c in namespace and returns its StatefulSet.
func installHubChart(t *testing.T, c *membercluster.Cluster, namespace string, sets []string) *appsv1.StatefulSet {
	t.Helper()
	manifests, err := renderChart(t, "charts/flotilla-hub", "flotilla-hub", namespace, sets)
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeManifests(t, manifests)
	applyObjects(t, c, namespace, objs)
	return hubStatefulSet(t, objs)
}

func hubStatefulSet(t *testing.T, objs []*unstructured.Unstructured) *appsv1.StatefulSet {
	t.Helper()
	var sts appsv1.StatefulSet
	findObject(t, objs, "StatefulSet", "", &sts)
	return &sts
}

// checkHubDataMount: the container's --data-dir is the data volume.
func checkHubDataMount(t *testing.T, sts *appsv1.StatefulSet) {
	t.Helper()
	ctr := sts.Spec.Template.Spec.Containers[0]
	if !slices.Contains(ctr.Args, "--data-dir="+hubDataDir) {
		t.Errorf("args %q, want --data-dir=%s", ctr.Args, hubDataDir)
	}
	if !slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "data" && m.MountPath == hubDataDir }) {
		t.Errorf("volumeMounts %+v, want data at %s", ctr.VolumeMounts, hubDataDir)
	}
}

// checkHubServices: agents dial UDP 7443 (QUIC) and TCP 7443 (the
// WebSocket fallback), the API is TCP 6443, each to the container port of
// that name.
func checkHubServices(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	want := map[string][]corev1.ServicePort{
		"flotilla-hub-agents": {
			{Name: "quic", Port: 7443, TargetPort: intstr.FromString("quic"), Protocol: corev1.ProtocolUDP},
			{Name: "websocket", Port: 7443, TargetPort: intstr.FromString("websocket"), Protocol: corev1.ProtocolTCP},
		},
		"flotilla-hub": {{Name: "api", Port: 6443, TargetPort: intstr.FromString("api"), Protocol: corev1.ProtocolTCP}},
	}
	sts := hubStatefulSet(t, objs)
	ports := map[string]corev1.ContainerPort{}
	for _, p := range sts.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = p
	}
	for name, want := range want {
		var svc corev1.Service
		findObject(t, objs, "Service", name, &svc)
		if diff := cmp.Diff(want, svc.Spec.Ports); diff != "" {
			t.Errorf("Service %s ports (-want +got):\n%s", name, diff)
		}
		for _, port := range want {
			if cp, ok := ports[port.TargetPort.StrVal]; !ok || cp.Protocol != port.Protocol {
				t.Errorf("Service %s targets container port %s: %+v", name, port.TargetPort.StrVal, cp)
			}
		}
		if !cmpLabels(svc.Spec.Selector, sts.Spec.Template.Labels) {
			t.Errorf("Service %s selects %v, the hub pod has %v", name, svc.Spec.Selector, sts.Spec.Template.Labels)
		}
	}
}

// checkHubHTTPTLS: with TLS, the hub serves --http-addr over HTTPS, its
// certificate names the metrics Service, and the probes use HTTPS.
func checkHubHTTPTLS(on bool) func(t *testing.T, objs []*unstructured.Unstructured) {
	return func(t *testing.T, objs []*unstructured.Unstructured) {
		t.Helper()
		ctr := hubStatefulSet(t, objs).Spec.Template.Spec.Containers[0]
		if got := slices.Contains(ctr.Args, "--http-tls"); got != on {
			t.Errorf("args %q: --http-tls %v, want %v", ctr.Args, got, on)
		}
		sans := ""
		for _, a := range ctr.Args {
			if v, ok := strings.CutPrefix(a, "--tls-san="); ok {
				sans = v
			}
		}
		if got := strings.Contains(sans, "flotilla-hub-metrics.flotilla-hub.svc"); got != on {
			t.Errorf("--tls-san=%s names the metrics Service: %v, want %v", sans, got, on)
		}
		want := corev1.URISchemeHTTP
		if on {
			want = corev1.URISchemeHTTPS
		}
		for name, probe := range map[string]*corev1.Probe{"startup": ctr.StartupProbe, "liveness": ctr.LivenessProbe, "readiness": ctr.ReadinessProbe} {
			if got := probe.HTTPGet.Scheme; got != want && !(got == "" && want == corev1.URISchemeHTTP) {
				t.Errorf("%s probe scheme %q, want %s", name, got, want)
			}
		}
	}
}

// checkHubNetworkPolicy: agents reach the QUIC and WebSocket ports from
// anywhere, the HTTP port only from the release's namespace, the API from
// anywhere unless limited, and replicas each other's gossip.
func checkHubNetworkPolicy(replicated bool) func(t *testing.T, objs []*unstructured.Unstructured) {
	return func(t *testing.T, objs []*unstructured.Unstructured) {
		t.Helper()
		var np networkingv1.NetworkPolicy
		findObject(t, objs, "NetworkPolicy", "flotilla-hub", &np)
		sts := hubStatefulSet(t, objs)
		if !cmpLabels(np.Spec.PodSelector.MatchLabels, sts.Spec.Template.Labels) {
			t.Errorf("NetworkPolicy selects %v, the hub pod has %v", np.Spec.PodSelector.MatchLabels, sts.Spec.Template.Labels)
		}
		if diff := cmp.Diff([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes); diff != "" {
			t.Errorf("policyTypes (-want +got):\n%s", diff)
		}
		port := func(name string, proto corev1.Protocol) networkingv1.NetworkPolicyPort {
			p := intstr.FromString(name)
			return networkingv1.NetworkPolicyPort{Port: &p, Protocol: &proto}
		}
		want := []networkingv1.NetworkPolicyIngressRule{
			{Ports: []networkingv1.NetworkPolicyPort{port("quic", corev1.ProtocolUDP), port("websocket", corev1.ProtocolTCP)}},
			{Ports: []networkingv1.NetworkPolicyPort{port("api", corev1.ProtocolTCP)}},
			{Ports: []networkingv1.NetworkPolicyPort{port("http", corev1.ProtocolTCP)}, From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}},
		}
		if replicated {
			want[1].From = []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24"}}}
			want = append(want, networkingv1.NetworkPolicyIngressRule{
				Ports: []networkingv1.NetworkPolicyPort{port("gossip-tcp", corev1.ProtocolTCP), port("gossip-udp", corev1.ProtocolUDP)},
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: sts.Spec.Selector.MatchLabels}}}})
		}
		if diff := cmp.Diff(want, np.Spec.Ingress); diff != "" {
			t.Errorf("ingress rules (-want +got):\n%s", diff)
		}
		ports := map[string]bool{}
		for _, p := range sts.Spec.Template.Spec.Containers[0].Ports {
			ports[p.Name] = true
		}
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				if !ports[p.Port.StrVal] {
					t.Errorf("NetworkPolicy names port %s, which the hub container lacks", p.Port.StrVal)
				}
			}
		}
	}
}

// checkHubServiceMonitor: the ServiceMonitor scrapes /metrics over HTTPS
// with tlsConfig (JSON).
func checkHubServiceMonitor(tlsConfig string) func(t *testing.T, objs []*unstructured.Unstructured) {
	return func(t *testing.T, objs []*unstructured.Unstructured) {
		t.Helper()
		var sm struct {
			Spec struct {
				Endpoints []struct {
					Port      string         `json:"port"`
					Path      string         `json:"path"`
					Scheme    string         `json:"scheme"`
					TLSConfig map[string]any `json:"tlsConfig"`
				} `json:"endpoints"`
			} `json:"spec"`
		}
		findObject(t, objs, "ServiceMonitor", "", &sm)
		if len(sm.Spec.Endpoints) != 1 {
			t.Fatalf("ServiceMonitor endpoints %+v, want one", sm.Spec.Endpoints)
		}
		ep := sm.Spec.Endpoints[0]
		got, err := json.Marshal(ep.TLSConfig)
		if err != nil {
			t.Fatal(err)
		}
		if ep.Port != "http" || ep.Path != "/metrics" || ep.Scheme != "https" || string(got) != tlsConfig {
			t.Errorf("ServiceMonitor endpoint %s %s %s, tlsConfig %s; want http /metrics https, %s", ep.Port, ep.Path, ep.Scheme, got, tlsConfig)
		}
	}
}

// cmpLabels: every selector label is on the pod.
func cmpLabels(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestHubChart installs charts/flotilla-hub into a member cluster's real
// kube-apiserver (server-side apply, StatefulSet with its volume claim
// template, Services) and runs the hub as its pod spec says (non-root, a
// read-only root, the data volume a fresh tmpfs): it answers /readyz, its
// API serves the admin kubeconfig it wrote on the data volume, and an agent
// installed with the agent chart joins it with a token it made.
func TestHubChart(t *testing.T) {
	chartrenderPath(t)
	env := membercluster.StartForTest(t, membercluster.Specs(1)...)
	c := env.Cluster("member-1")
	member, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	// Test-only: the container shares the host's network, so its ports are
	// free ones; agents dial the QUIC port on loopback.
	quic, websocket, api, httpPort := freePort(t, freeport.UDP), freePort(t, freeport.TCP), freePort(t, freeport.TCP), freePort(t, freeport.TCP)
	sets := []string{
		"ports.quic=" + strconv.Itoa(quic), "ports.websocket=" + strconv.Itoa(websocket), "ports.api=" + strconv.Itoa(api), "ports.http=" + strconv.Itoa(httpPort),
		"hub.agentAddress=127.0.0.1:" + strconv.Itoa(quic),
	}
	const namespace = "flotilla-hub"
	sts := installHubChart(t, c, namespace, sets)
	pod := controllerPod(t, member, namespace, sts.Spec.Selector)
	waitFor(t, 30*time.Second, "the StatefulSet's volume claim", func() (bool, string) {
		_, err := member.CoreV1().PersistentVolumeClaims(namespace).Get(t.Context(), "data-"+pod.Name, metav1.GetOptions{})
		return err == nil, errString(err)
	})
	hubPod := startPod(t, c, pod, imageOf("flotilla-hub"))
	t.Run("runs as its pod spec says", func(t *testing.T) {
		checkPodProcess(t, hubPod, pod)
	})

	t.Run("answers /readyz over HTTPS and serves its API", func(t *testing.T) {
		pid, err := hubPod.ProgramPID()
		if err != nil {
			t.Fatal(err)
		}
		// The certificate is the hub CA's, for the metrics Service's name.
		caFile := filepath.Join("/proc", strconv.Itoa(pid), "root", hubDataDir, "pki", "ca.crt")
		readyz := "https://127.0.0.1:" + strconv.Itoa(httpPort) + "/readyz"
		waitFor(t, 120*time.Second, "the hub's /readyz", func() (bool, string) {
			if hubPod.HasExited() {
				t.Fatalf("the hub exited: %v", hubPod.ExitError())
			}
			client, err := caClient(caFile, "flotilla-hub-metrics."+namespace+".svc")
			if err != nil {
				return false, err.Error()
			}
			code, err := clientStatus(client, readyz)
			return code == http.StatusOK, strconv.Itoa(code) + " " + errString(err)
		})
		if code, err := httpStatus("http://127.0.0.1:" + strconv.Itoa(httpPort) + "/readyz"); code != http.StatusBadRequest {
			t.Errorf("plain HTTP to the HTTPS endpoint: %d %v, want 400", code, err)
		}
		kubeconfig := filepath.Join("/proc", strconv.Itoa(pid), "root", hubDataDir, "admin.kubeconfig")
		out := mustKubectl(t, kubeconfig, "get", "--raw", "/readyz")
		if strings.TrimSpace(out) != "ok" {
			t.Errorf("the hub API's /readyz: %q", out)
		}
		mustKubectl(t, kubeconfig, "get", "clusters")
	})

	t.Run("an agent installed with its chart joins it", func(t *testing.T) {
		pid, err := hubPod.ProgramPID()
		if err != nil {
			t.Fatal(err)
		}
		dataDir := filepath.Join("/proc", strconv.Itoa(pid), "root", hubDataDir)
		out, err := exec.Command(filepath.Join(binDir, "flotilla-hub"), "token", "create", "--data-dir", dataDir, "--cluster", "member-1").CombinedOutput()
		if err != nil {
			t.Fatalf("flotilla-hub token create: %v\n%s", err, out)
		}
		if want := "--set hub.address=127.0.0.1:" + strconv.Itoa(quic) + " "; !strings.Contains(string(out), want) {
			t.Errorf("the join command does not carry the chart's hub.agentAddress (%q):\n%s", want, out)
		}
		installAgentChart(t, c, string(out))
		kubeconfig := filepath.Join(dataDir, "admin.kubeconfig")
		waitFor(t, 90*time.Second, "member-1 Ready on the chart's hub", func() (bool, string) {
			out, err := kubectl(t, kubeconfig, "get", "cluster", "member-1", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
			return err == nil && out == "True", out
		})
	})
}

// caClient is an HTTPS client that trusts only the CA in caFile and
// checks that the server's certificate names serverName.
func caClient(caFile, serverName string) (*http.Client, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no certificate", caFile)
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: serverName}}}, nil
}

// insecureClient is an HTTPS client that does not check the server's
// certificate: for a test that checks something else.
var insecureClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true}}}

func clientStatus(client *http.Client, u string) (int, error) {
	resp, err := client.Get(u)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func clientGet(client *http.Client, u string) (int, string) {
	resp, err := client.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(body)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestHubChartReplicas installs charts/flotilla-hub with two replicas on a
// three-member etcd into a member cluster's real kube-apiserver and runs
// both pods as their spec says (the second's ports moved: the test's pods
// share the host's network). Exactly one pod carries the leader label the
// agents Service selects, and both are Ready; SIGKILL of the leader moves
// the label to the other, and the killed pod, restarted, takes the label
// its previous life left off itself.
func TestHubChartReplicas(t *testing.T) {
	chartrenderPath(t)
	etcd := startEtcdCluster(t, 3)
	env := membercluster.StartForTest(t, membercluster.Specs(1)...)
	c := env.Cluster("member-1")
	member, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	type ports struct{ quic, api, http, gossip int }
	pp := []ports{
		{freePort(t, freeport.UDP), freePort(t, freeport.TCP), freePort(t, freeport.TCP), freePort(t, freeport.TCPAndUDP)},
		{freePort(t, freeport.UDP), freePort(t, freeport.TCP), freePort(t, freeport.TCP), freePort(t, freeport.TCPAndUDP)},
	}
	sets := []string{
		"replicas=2", "etcd.endpoints={" + strings.Join(etcd.endpoints, ",") + "}", "persistence.enabled=false", "agentService.websocket=false",
		"ports.quic=" + strconv.Itoa(pp[0].quic), "ports.api=" + strconv.Itoa(pp[0].api), "ports.http=" + strconv.Itoa(pp[0].http),
		"ports.gossip=" + strconv.Itoa(pp[0].gossip),
		// No cluster DNS here: the replicas' loopback addresses instead of
		// the headless Service's name.
		"gossip.join={127.0.0.1:" + strconv.Itoa(pp[0].gossip) + ",127.0.0.1:" + strconv.Itoa(pp[1].gossip) + "}",
	}
	const namespace = "flotilla-hub"
	sts := installHubChart(t, c, namespace, sets)
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	waitFor(t, 60*time.Second, "the StatefulSet's two pods", func() (bool, string) {
		list, err := member.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return false, err.Error()
		}
		pods = list.Items
		return len(pods) == 2, fmt.Sprintf("%d pods", len(pods))
	})
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	// The second pod's ports move: both share the host's network here.
	second := pods[1].DeepCopy()
	for i, arg := range second.Spec.Containers[0].Args {
		for from, to := range map[string]string{
			"--quic-addr=:" + strconv.Itoa(pp[0].quic):                          "--quic-addr=:" + strconv.Itoa(pp[1].quic),
			"--api-addr=0.0.0.0:" + strconv.Itoa(pp[0].api):                     "--api-addr=0.0.0.0:" + strconv.Itoa(pp[1].api),
			"--http-addr=0.0.0.0:" + strconv.Itoa(pp[0].http):                   "--http-addr=0.0.0.0:" + strconv.Itoa(pp[1].http),
			"--gossip-addr=0.0.0.0:" + strconv.Itoa(pp[0].gossip):               "--gossip-addr=0.0.0.0:" + strconv.Itoa(pp[1].gossip),
			"--gossip-advertise-addr=[$(POD_IP)]:" + strconv.Itoa(pp[0].gossip): "--gossip-advertise-addr=[$(POD_IP)]:" + strconv.Itoa(pp[1].gossip),
		} {
			if arg == from {
				second.Spec.Containers[0].Args[i] = to
			}
		}
	}
	ctrs := []*podrun.Container{startPod(t, c, &pods[0], imageOf("flotilla-hub")), startPod(t, c, second, imageOf("flotilla-hub"))}
	readyz := func(i int) int {
		code, _ := clientStatus(insecureClient, "https://127.0.0.1:"+strconv.Itoa(pp[i].http)+"/readyz")
		return code
	}
	leaders := func() []string {
		list, err := member.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: podlabel.Label + "=true"})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
		return names
	}
	var leader int
	waitFor(t, 120*time.Second, "one labelled leader, both replicas Ready", func() (bool, string) {
		for i, ctr := range ctrs {
			if ctr.HasExited() {
				t.Fatalf("%s exited: %v", pods[i].Name, ctr.ExitError())
			}
		}
		names := leaders()
		if len(names) == 1 {
			leader = slices.Index([]string{pods[0].Name, pods[1].Name}, names[0])
		}
		return len(names) == 1 && readyz(0) == http.StatusOK && readyz(1) == http.StatusOK,
			fmt.Sprintf("leaders %v, /readyz %d and %d", names, readyz(0), readyz(1))
	})
	standby := 1 - leader
	t.Logf("%s leads, %s stands by", pods[leader].Name, pods[standby].Name)
	waitFor(t, 30*time.Second, "the replicas gossip", func() (bool, string) {
		_, body := clientGet(insecureClient, "https://127.0.0.1:"+strconv.Itoa(pp[leader].http)+"/metrics")
		return strings.Contains(body, "\nflotilla_hub_gossip_members 2\n") && !strings.Contains(body, "\nflotilla_hub_session_tables_sent_total 0\n"),
			"leader's gossip metrics: " + metricLines(body, "flotilla_hub_gossip_", "flotilla_hub_session_tables_")
	})

	killed := time.Now()
	if err := ctrs[leader].Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, pods[standby].Name+" labelled", func() (bool, string) {
		names := leaders()
		return slices.Contains(names, pods[standby].Name), fmt.Sprintf("leaders %v", names)
	})
	t.Logf("the standby was labelled %v after the leader's SIGKILL (election lease 15s)", time.Since(killed).Round(100*time.Millisecond))
	if err := ctrs[leader].Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the restarted pod unlabelled", func() (bool, string) {
		names := leaders()
		return slices.Equal(names, []string{pods[standby].Name}), fmt.Sprintf("leaders %v", names)
	})
}

// metricLines are the lines of a /metrics body that start with one of
// prefixes.
func metricLines(body string, prefixes ...string) string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				out = append(out, line)
			}
		}
	}
	return strings.Join(out, "; ")
}
