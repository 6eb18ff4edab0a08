package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
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
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/flotilla-io/flotilla/agent/work"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/test/freeport"
	"github.com/flotilla-io/flotilla/test/membercluster"
	"github.com/flotilla-io/flotilla/test/podrun"
	"github.com/flotilla-io/flotilla/test/process"
)

// chartrenderPath is the chart renderer `make testbin` builds (Helm Go SDK:
// strict lint, values schema, helm install --dry-run).
func chartrenderPath(t *testing.T) string {
	t.Helper()
	return testbinTool(t, "chartrender")
}

// testbinTool is the path of a tool `make testbin` builds into
// $FLOTILLA_TESTBIN; the test fails clearly when it is not there.
func testbinTool(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("FLOTILLA_TESTBIN")
	if dir == "" {
		t.Fatalf("FLOTILLA_TESTBIN is not set: this test needs $FLOTILLA_TESTBIN/%s (make testbin builds it)", name)
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("this test needs %s (make testbin builds it): %v", p, err)
	}
	return p
}

// renderChart lints and renders a chart of the repository as helm install
// would, and returns the manifests, or the renderer's error output.
func renderChart(t *testing.T, chart, release, namespace string, sets []string) (string, error) {
	t.Helper()
	args := []string{"--name", release, "--namespace", namespace}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	args = append(args, filepath.Join("..", "..", chart))
	cmd := exec.Command(chartrenderPath(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("chartrender %s: %w\n%s", chart, err, stderr.String())
	}
	return stdout.String(), nil
}

// decodeManifests splits rendered manifests into objects.
func decodeManifests(t *testing.T, manifests string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	var objs []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("rendered manifests: %v", err)
		}
		if len(obj) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: obj})
	}
}

// findObject returns the one rendered object of kind (and name, if not
// empty), converted to out.
func findObject(t *testing.T, objs []*unstructured.Unstructured, kind, name string, out any) {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("rendered %d objects of kind %s named %q, want 1", len(found), kind, name)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(found[0].Object, out); err != nil {
		t.Fatalf("%s %s: %v", kind, found[0].GetName(), err)
	}
}

// helmInstall is a `helm install` command as flotilla-hub token create
// prints it.
type helmInstall struct {
	release, chart, namespace string
	createNamespace           bool
	sets                      []string
}

// parseHelmInstall finds the helm install command in out (lines joined by
// backslash continuations) and reads its arguments; anything it does not
// know (quotes, other flags) is an error, so the printed command cannot
// drift from what the test runs.
func parseHelmInstall(out string) (helmInstall, error) {
	start := strings.Index(out, "helm install ")
	if start < 0 {
		return helmInstall{}, errors.New("no helm install command")
	}
	var text strings.Builder
	for line := range strings.Lines(out[start:]) {
		line = strings.TrimRight(line, "\n")
		cont, more := strings.CutSuffix(line, "\\")
		text.WriteString(cont + " ")
		if !more {
			break
		}
	}
	if strings.ContainsAny(text.String(), `'"$`) {
		return helmInstall{}, fmt.Errorf("command %q: quoting is not expected", text.String())
	}
	return helmInstallOf(strings.Fields(text.String()))
}

// helmInstallOf reads the words of a helm install command: the release,
// the chart, --namespace, --create-namespace and --set; anything else is
// an error.
func helmInstallOf(f []string) (helmInstall, error) {
	command := strings.Join(f, " ")
	if len(f) < 4 || f[0] != "helm" || f[1] != "install" {
		return helmInstall{}, fmt.Errorf("command %q: want helm install RELEASE CHART", command)
	}
	h := helmInstall{release: f[2], chart: f[3], namespace: "default"}
	for i := 4; i < len(f); i++ {
		flag, value, hasValue := strings.Cut(f[i], "=")
		next := func() (string, error) {
			if hasValue {
				return value, nil
			}
			if i+1 >= len(f) {
				return "", fmt.Errorf("%s without a value", flag)
			}
			i++
			return f[i], nil
		}
		var err error
		switch flag {
		case "--namespace", "-n":
			h.namespace, err = next()
		case "--create-namespace":
			h.createNamespace = true
		case "--set":
			var s string
			s, err = next()
			h.sets = append(h.sets, s)
		default:
			err = fmt.Errorf("unexpected argument %q", f[i])
		}
		if err != nil {
			return helmInstall{}, fmt.Errorf("command %q: %w", command, err)
		}
	}
	return h, nil
}

// applyObjects server-side applies every object to a member cluster with
// field manager "helm", namespaced ones without a namespace into
// namespace, after creating namespace (helm --create-namespace).
func applyObjects(t *testing.T, c *membercluster.Cluster, namespace string, objs []*unstructured.Unstructured) {
	t.Helper()
	cfg, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	if _, err := client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", namespace, err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s %s: %v", gvk, obj.GetName(), err)
			continue
		}
		var res dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if obj.GetNamespace() == "" {
				obj.SetNamespace(namespace)
			}
			res = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := res.Apply(t.Context(), obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "helm", Force: true}); err != nil {
			t.Errorf("server-side apply %s %s/%s: %v", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// controllerPod waits until the member cluster's controllers made a Pod
// matching selector in namespace, and returns it as stored (after
// admission: with its service-account token volume).
func controllerPod(t *testing.T, client kubernetes.Interface, namespace string, selector *metav1.LabelSelector) *corev1.Pod {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	waitFor(t, 60*time.Second, "a Pod of "+sel.String(), func() (bool, string) {
		pods, err := client.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return false, err.Error()
		}
		if len(pods.Items) == 0 {
			return false, "no pods"
		}
		slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		pod = &pods.Items[0]
		return true, ""
	})
	return pod
}

// apiServerHostPort is the member cluster's API server address, for
// KUBERNETES_SERVICE_HOST/PORT (its serving certificate holds 127.0.0.1).
func apiServerHostPort(t *testing.T, c *membercluster.Cluster) string {
	t.Helper()
	u, err := url.Parse(c.Server)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// agentImage is the flotilla-agent image as make images builds it: the
// binary at /usr/local/bin, user 65532, /tmp.
func agentImage() podrun.Image {
	return imageOf("flotilla-agent")
}

func imageOf(binary string) podrun.Image {
	entry := "/usr/local/bin/" + binary
	return podrun.Image{
		Entrypoint: []string{entry},
		Binaries:   map[string]string{entry: filepath.Join(binDir, binary)},
		Dirs:       map[string]os.FileMode{"/tmp": os.ModeSticky | 0o777},
		User:       65532, Group: 65532,
	}
}

// startPod runs a container of pod as its spec says, until the test ends.
func startPod(t *testing.T, c *membercluster.Cluster, pod *corev1.Pod, img podrun.Image) *podrun.Container {
	t.Helper()
	client, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctr, err := podrun.Start(t.Context(), podrun.Spec{
		Pod: pod, Image: img, Client: client, APIServer: apiServerHostPort(t, c),
		Dir: dir, LogPath: filepath.Join(dir, "container.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ctr.Stop(); err != nil {
			t.Errorf("stop %s: %v", ctr.Name, err)
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", ctr.Name, process.TailFile(ctr.LogPath, 40))
		}
	})
	return ctr
}

// httpStatus is GET url's status code, or the error.
func httpStatus(u string) (int, error) {
	resp, err := http.Get(u)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Values every agent render test sets, as the printed helm command does.
var agentTestValues = []string{
	"cluster.name=edge-1", "hub.address=hub.example.com:7443",
	"hub.caCertHash=sha256:" + strings.Repeat("ab", 32), "bootstrapToken=abcdef.0123456789abcdef",
}

// TestAgentChartRender checks what charts/flotilla-agent renders, without
// a cluster: a hardened pod, least-privilege RBAC by default, cluster-admin
// only on opt-in, and clear schema errors for bad values.
func TestAgentChartRender(t *testing.T) {
	tests := []struct {
		name    string
		sets    []string
		wantErr []string // substrings of the renderer's error
		check   func(t *testing.T, objs []*unstructured.Unstructured)
	}{
		{name: "defaults: hardened pod", check: checkHardenedAgentPod},
		{name: "defaults: what helm install creates", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.GetKind())
			}
			slices.Sort(kinds)
			want := []string{"ClusterRole", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "Deployment", "PodDisruptionBudget", "Role", "RoleBinding", "Secret", "ServiceAccount"}
			if !slices.Equal(kinds, want) {
				t.Errorf("rendered kinds %v, want %v", kinds, want)
			}
		}},
		{name: "defaults: no rule grants everything, no cluster-admin", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if got := grantsEverything(t, objs); len(got) > 0 {
				t.Errorf("the default RBAC grants everything: %v", got)
			}
		}},
		{name: "defaults: the ServiceAccount owns the agent's objects", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			checkAgentOwner(t, objs, "flotilla-agent")
		}},
		{name: "a ServiceAccount of the user's owns nothing", sets: []string{"serviceAccount.create=false", "serviceAccount.name=mine"}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			checkAgentOwner(t, objs, "")
		}},
		{name: "rbac.clusterAdmin=true grants everything", sets: []string{"rbac.clusterAdmin=true"}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if got := grantsEverything(t, objs); len(got) == 0 {
				t.Error("rbac.clusterAdmin=true grants no * on *")
			}
		}},
		{name: "workloads in listed namespaces: write rights only there", sets: []string{"rbac.workloads.namespaces={web,shop}"}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			writers := map[string]bool{} // namespaces where a Role grants the workload verbs
			for _, o := range objs {
				if o.GetKind() == "ClusterRole" && hasVerb(t, o, "patch") {
					t.Errorf("ClusterRole %s grants patch cluster-wide with workloads limited to namespaces", o.GetName())
				}
				if o.GetKind() == "Role" && strings.HasSuffix(o.GetName(), "-workloads") && hasVerb(t, o, "patch") {
					writers[o.GetNamespace()] = true
				}
			}
			if !cmp.Equal(writers, map[string]bool{"web": true, "shop": true}) {
				t.Errorf("workload Roles in %v, want web and shop", writers)
			}
		}},
		{name: "unbound token's placeholder name", sets: []string{"cluster.name=<CLUSTER-NAME>"}, wantErr: []string{"/cluster/name"}},
		{name: "bad caCertHash", sets: []string{"hub.caCertHash=sha256:abc"}, wantErr: []string{"/hub/caCertHash", "does not match pattern"}},
		{name: "caCertHash without sha256:", sets: []string{"hub.caCertHash=" + strings.Repeat("ab", 32)}, wantErr: []string{"/hub/caCertHash"}},
		{name: "missing cluster.name", sets: []string{"cluster.name="}, wantErr: []string{"/cluster/name"}},
		{name: "bad bootstrap token", sets: []string{"bootstrapToken=abc"}, wantErr: []string{"/bootstrapToken"}},
		{name: "unknown transport", sets: []string{"hub.transport=udp"}, wantErr: []string{"/hub/transport"}},
		{name: "bad WebSocket address", sets: []string{"hub.websocketAddress=hub.example.com"}, wantErr: []string{"/hub/websocketAddress"}},
		{name: "every hub replica", sets: []string{`hub.address=hub-0.example.com:7443\,hub-1.example.com:7443`}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			var d appsv1.Deployment
			findObject(t, objs, "Deployment", "flotilla-agent", &d)
			if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--hub=hub-0.example.com:7443,hub-1.example.com:7443") {
				t.Errorf("args %q, want both replicas in --hub", args)
			}
		}},
		{name: "a list with an empty entry", sets: []string{`hub.address=hub-0.example.com:7443\,`}, wantErr: []string{"/hub/address"}},
		{name: "WebSocket only, at its own address", sets: []string{"hub.transport=websocket", "hub.websocketAddress=hub.example.com:443"}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			var d appsv1.Deployment
			findObject(t, objs, "Deployment", "flotilla-agent", &d)
			args := d.Spec.Template.Spec.Containers[0].Args
			if !slices.Contains(args, "--transport=websocket") || !slices.Contains(args, "--hub-websocket=hub.example.com:443") {
				t.Errorf("args %q, want --transport=websocket and --hub-websocket=hub.example.com:443", args)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := renderChart(t, "charts/flotilla-agent", "flotilla-agent", "flotilla-system", append(slices.Clone(agentTestValues), tc.sets...))
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

// checkAgentOwner checks that the agent is told to make ServiceAccount
// owner the owner of its Lease, certificate Secret and records, and that
// its Role lets it read exactly that one; owner "": neither.
func checkAgentOwner(t *testing.T, objs []*unstructured.Unstructured, owner string) {
	t.Helper()
	var d appsv1.Deployment
	findObject(t, objs, "Deployment", "flotilla-agent", &d)
	if got := argValue(d.Spec.Template.Spec.Containers[0].Args, "--owner-service-account"); got != owner {
		t.Errorf("--owner-service-account=%q, want %q", got, owner)
	}
	var role rbacv1.Role
	findObject(t, objs, "Role", "flotilla-agent", &role)
	var readable []string
	for _, rule := range role.Rules {
		if slices.Contains(rule.Resources, "serviceaccounts") {
			if !slices.Equal(rule.Verbs, []string{"get"}) || !slices.Equal(rule.APIGroups, []string{""}) {
				t.Errorf("the agent's Role grants %v on serviceaccounts in groups %q, want get alone", rule.Verbs, rule.APIGroups)
			}
			readable = append(readable, rule.ResourceNames...)
		}
	}
	want := []string{owner}
	if owner == "" {
		want = nil
	}
	if !slices.Equal(readable, want) {
		t.Errorf("the agent's Role lets it read ServiceAccounts %q, want %q", readable, want)
	}
}

// checkHardenedAgentPod: non-root, read-only root, no privilege
// escalation, all capabilities dropped, probes on the agent's endpoints.
func checkHardenedAgentPod(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var d appsv1.Deployment
	findObject(t, objs, "Deployment", "", &d)
	checkHardenedPod(t, d.Spec.Template.Spec)
	ctr := d.Spec.Template.Spec.Containers[0]
	for name, probe := range map[string]*corev1.Probe{"/healthz": ctr.LivenessProbe, "/readyz": ctr.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != name {
			t.Errorf("probe for %s: %+v", name, probe)
		}
	}
}

// checkHardenedPod checks every container's securityContext (merged with
// the pod's as the kubelet does).
func checkHardenedPod(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("container %s: no securityContext", c.Name)
			continue
		}
		nonRoot := sc.RunAsNonRoot
		if nonRoot == nil && spec.SecurityContext != nil {
			nonRoot = spec.SecurityContext.RunAsNonRoot
		}
		switch {
		case nonRoot == nil || !*nonRoot:
			t.Errorf("container %s: runAsNonRoot is not true", c.Name)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("container %s: readOnlyRootFilesystem is not true", c.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("container %s: allowPrivilegeEscalation is not false", c.Name)
		case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
			t.Errorf("container %s: capabilities %+v, want drop [ALL] and nothing added", c.Name, sc.Capabilities)
		}
	}
}

// hasVerb: a rule of the (Cluster)Role grants verb.
func hasVerb(t *testing.T, o *unstructured.Unstructured, verb string) bool {
	t.Helper()
	var r rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(r.Rules, func(rule rbacv1.PolicyRule) bool {
		return slices.Contains(rule.Verbs, verb) || slices.Contains(rule.Verbs, "*")
	})
}

// grantsEverything lists the rendered roles whose rules allow every verb on
// every resource of every group, and bindings to cluster-admin.
func grantsEverything(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var found []string
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "Role":
			var r rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				t.Fatal(err)
			}
			for _, rule := range r.Rules {
				if slices.Contains(rule.APIGroups, "*") && slices.Contains(rule.Resources, "*") && slices.Contains(rule.Verbs, "*") {
					found = append(found, o.GetKind()+"/"+o.GetName())
				}
			}
		case "ClusterRoleBinding", "RoleBinding":
			var b rbacv1.ClusterRoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
				t.Fatal(err)
			}
			if b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == "cluster-admin" {
				found = append(found, o.GetKind()+"/"+o.GetName()+" (cluster-admin)")
			}
		}
	}
	return found
}

// The Work the chart's default RBAC must refuse: an RBAC Role (Works that
// grant rights need rbac.clusterAdmin or extraClusterRules).
const roleMember1YAML = `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: secret-reader, namespace: web}
rules: [{apiGroups: [""], resources: [secrets], verbs: [get]}]
---
apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: role-member-1, namespace: web}
spec:
  resourceSelectors: [{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, name: secret-reader}]
  placement: {clusterAffinity: {clusterNames: [member-1]}}
`

// TestAgentChart installs charts/flotilla-agent as the helm command that
// flotilla-hub token create prints would (rendered with the Helm SDK,
// applied with server-side apply to a real kube-apiserver), runs the agent
// as its pod spec says (its args and env, the ServiceAccount's token as its
// only credential, the token Secret as a file, non-root on a read-only
// root), and checks that it joins, turns Ready, runs the seed nginx under
// the chart's RBAC alone, and that a Work the RBAC refuses fails with
// Forbidden while nothing else breaks.
func TestAgentChart(t *testing.T) {
	chartrenderPath(t)
	env := membercluster.StartForTest(t, membercluster.Specs(1)...)
	c := env.Cluster("member-1")
	// The chart's agent asks for a 40 s cluster lease and renews it every
	// 10 s: the hub gets its default grace period (40 s), not the 4 s of
	// the other tests' 2 s leases.
	h := startHub(t, "--cluster-monitor-grace-period=40s")
	member, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command(filepath.Join(binDir, "flotilla-hub"), "token", "create", "--data-dir", h.dataDir, "--cluster", "member-1", "--ttl", "10m").CombinedOutput()
	if err != nil {
		t.Fatalf("flotilla-hub token create: %v\n%s", err, out)
	}
	inst := installAgentChart(t, c, string(out))
	install, d, pod, agentPod, httpPort := inst.helm, inst.deployment, inst.pod, inst.container, inst.httpPort

	t.Run("runs as its pod spec says", func(t *testing.T) {
		checkPodProcess(t, agentPod, pod)
	})

	t.Run("joins with the token and turns Ready", func(t *testing.T) {
		waitReady(t, h, "member-1", 90*time.Second)
		waitFor(t, 30*time.Second, "the agent's probes answer 200", func() (bool, string) {
			var states []string
			for _, path := range []string{"/healthz", "/readyz"} {
				code, err := httpStatus("http://127.0.0.1:" + strconv.Itoa(httpPort) + path)
				if code != http.StatusOK {
					states = append(states, fmt.Sprintf("%s: %d %v", path, code, err))
				}
			}
			return len(states) == 0, strings.Join(states, "; ")
		})
		// The certificate lives in the chart's Secret, the election in its
		// Lease, held by this pod.
		certSecret := argValue(agentPod.Args, "--cert-secret")
		sec, err := member.CoreV1().Secrets(install.namespace).Get(t.Context(), certSecret, metav1.GetOptions{})
		if err != nil || len(sec.Data["tls.crt"]) == 0 || len(sec.Data["tls.key"]) == 0 {
			t.Errorf("certificate Secret %s: %v (keys %v)", certSecret, err, keysOf(sec))
		}
		// The spent token is emptied in its Secret, under the chart's RBAC.
		tokenSecret := argValue(agentPod.Args, "--bootstrap-token-secret")
		waitFor(t, 10*time.Second, "the token emptied in Secret "+tokenSecret, func() (bool, string) {
			sec, err := member.CoreV1().Secrets(install.namespace).Get(t.Context(), tokenSecret, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return len(sec.Data["token"]) == 0, fmt.Sprintf("token key of %d bytes", len(sec.Data["token"]))
		})
		lease, err := member.CoordinationV1().Leases(install.namespace).Get(t.Context(), argValue(agentPod.Args, "--leader-elect-lease-name"), metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil || !strings.HasPrefix(*lease.Spec.HolderIdentity, pod.Name+"_") {
			t.Errorf("election Lease: %v, holder %v; want held by pod %s", err, holder(lease), pod.Name)
		}
	})

	// From here on the hub must show member-1 Ready throughout.
	watch := watchCluster(t, h, "member-1")
	f := &fleet{t: t, hub: h, env: env, clients: map[string]kubernetes.Interface{"member-1": member}, dir: t.TempDir()}
	t.Run("the seed nginx runs under the chart's RBAC", func(t *testing.T) {
		f.apply("seed.yaml", nginxYAML+"---\n"+nginxMember1YAML)
		waitFor(t, 60*time.Second, "nginx available on member-1", func() (bool, string) {
			d := f.deployment("member-1", "web", "nginx")
			if d == nil {
				return false, "absent"
			}
			return d.Status.AvailableReplicas == 3, fmt.Sprintf("available %d", d.Status.AvailableReplicas)
		})
		waitFor(t, 30*time.Second, "nginx's Work Applied", func() (bool, string) {
			w := workOf(t, h, "member-1", "Deployment", "nginx")
			return w != nil && meta.IsStatusConditionTrue(w.Status.Conditions, v1alpha1.WorkConditionApplied), describeWork(w)
		})
	})

	t.Run("a kind the RBAC refuses fails with Forbidden; nothing else breaks", func(t *testing.T) {
		before := f.deployment("member-1", "web", "nginx")
		if before == nil {
			t.Fatal("no nginx on member-1")
		}
		f.apply("role.yaml", roleMember1YAML)
		sa := "system:serviceaccount:" + install.namespace + ":" + d.Spec.Template.Spec.ServiceAccountName
		var w *v1alpha1.Work
		waitFor(t, 60*time.Second, "the Role's Work failed", func() (bool, string) {
			w = workOf(t, h, "member-1", "Role", "secret-reader")
			cond := workApplied(w)
			return cond != nil && cond.Status == metav1.ConditionFalse, describeWork(w)
		})
		msg := workApplied(w).Message
		t.Logf("the refused Work: %s", describeWork(w))
		if !strings.Contains(msg, "forbidden") || !strings.Contains(msg, sa) {
			t.Errorf("Applied=False message %q, want a Forbidden for %s", msg, sa)
		}
		if _, err := member.RbacV1().Roles("web").Get(t.Context(), "secret-reader", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the Role on member-1: %v, want it absent", err)
		}
		nginx := workOf(t, h, "member-1", "Deployment", "nginx")
		if !meta.IsStatusConditionTrue(nginx.Status.Conditions, v1alpha1.WorkConditionApplied) {
			t.Errorf("nginx's Work after the refused one: %s", describeWork(nginx))
		}
		if d := f.deployment("member-1", "web", "nginx"); d == nil || d.Status.AvailableReplicas != 3 || d.Generation != before.Generation {
			t.Errorf("nginx on member-1 after the refused Work: %+v, want it untouched at generation %d", d, before.Generation)
		}
		// The agent keeps renewing after the failure (every 10 s), and
		// the hub never showed the cluster other than Ready.
		renewedAfter(t, h, "member-1", time.Now())
		if bad, events := watch.finish(); len(bad) > 0 {
			t.Errorf("the hub showed member-1 not Ready (%d of %d watch events): %v", len(bad), events, bad)
		}
		if agentPod.HasExited() {
			t.Errorf("the agent exited: %v", agentPod.ExitError())
		}
	})

	t.Run("an uninstall leaves nothing the agent made; the workloads stay", func(t *testing.T) {
		uninstallAgentChart(t, c, inst)
		if d := f.deployment("member-1", "web", "nginx"); d == nil {
			t.Error("nginx on member-1 went with the agent, want it kept")
		}
	})
}

// uninstallAgentChart does what helm uninstall of inst does once the
// agent's pods are gone: it stops the agent, deletes what the chart
// created, and checks that the member cluster's garbage collector then
// deletes what the agent made for itself in the release namespace (its
// Lease, certificate Secret and Work records), all owned by the chart's
// ServiceAccount.
func uninstallAgentChart(t *testing.T, c *membercluster.Cluster, inst installedAgent) {
	t.Helper()
	member, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ns := inst.helm.namespace
	made := agentMadeObjects(t, member, ns, work.LabelManagedBy+"="+work.ManagedBy)
	if len(made) < 3 { // the Lease, the Secret, a record at least
		t.Fatalf("the agent made %v in %s, want its Lease, certificate Secret and Work records", made, ns)
	}
	sa, err := member.CoreV1().ServiceAccounts(ns).Get(t.Context(), inst.deployment.Spec.Template.Spec.ServiceAccountName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for obj, owners := range made {
		if !slices.ContainsFunc(owners, func(o metav1.OwnerReference) bool { return o.Kind == "ServiceAccount" && o.UID == sa.UID }) {
			t.Errorf("%s is owned by %v, want ServiceAccount %s", obj, owners, sa.Name)
		}
	}
	t.Logf("the agent made %v", slices.Sorted(maps.Keys(made)))
	if err := inst.container.Stop(); err != nil {
		t.Fatal(err)
	}
	deleteObjects(t, c, ns, inst.objects)
	waitFor(t, 60*time.Second, "the garbage collector to delete what the agent made", func() (bool, string) {
		left := agentMadeObjects(t, member, ns, "") // labelled or not
		return len(left) == 0, fmt.Sprintf("left: %v", slices.Sorted(maps.Keys(left)))
	})
}

// agentMadeObjects lists, by kind and name, the owners of the Leases,
// Secrets and ConfigMaps in namespace that match selector: labelled as
// the agent's, what the agent makes for itself.
func agentMadeObjects(t *testing.T, client kubernetes.Interface, namespace, selector string) map[string][]metav1.OwnerReference {
	t.Helper()
	opts := metav1.ListOptions{LabelSelector: selector}
	made := map[string][]metav1.OwnerReference{}
	leases, err := client.CoordinationV1().Leases(namespace).List(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range leases.Items {
		made["Lease "+o.Name] = o.OwnerReferences
	}
	secrets, err := client.CoreV1().Secrets(namespace).List(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range secrets.Items {
		made["Secret "+o.Name] = o.OwnerReferences
	}
	configMaps, err := client.CoreV1().ConfigMaps(namespace).List(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range configMaps.Items {
		if o.Name != "kube-root-ca.crt" { // every namespace's, from the controller-manager
			made["ConfigMap "+o.Name] = o.OwnerReferences
		}
	}
	return made
}

// deleteObjects deletes objs from c, as helm uninstall does (dependents
// in the background).
func deleteObjects(t *testing.T, c *membercluster.Cluster, namespace string, objs []*unstructured.Unstructured) {
	t.Helper()
	cfg, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))
	background := metav1.DeletePropagationBackground
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk, obj.GetName(), err)
		}
		var res dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = namespace
			}
			res = dyn.Resource(mapping.Resource).Namespace(ns)
		}
		err = res.Delete(t.Context(), obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &background})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s %s: %v", gvk.Kind, obj.GetName(), err)
		}
	}
}

// installedAgent is the agent chart installed in a member cluster and its
// first pod running.
type installedAgent struct {
	helm       helmInstall
	deployment appsv1.Deployment
	pod        *corev1.Pod
	container  *podrun.Container
	httpPort   int
	// objects are what the chart rendered and the install applied.
	objects []*unstructured.Unstructured
}

// installAgentChart installs charts/flotilla-agent into c as the helm
// command in tokenOutput (flotilla-hub token create's) says, and runs the
// first pod of its Deployment as its spec says.
func installAgentChart(t *testing.T, c *membercluster.Cluster, tokenOutput string) installedAgent {
	t.Helper()
	install, err := parseHelmInstall(tokenOutput)
	if err != nil {
		t.Fatalf("flotilla-hub token create printed:\n%s\n%v", tokenOutput, err)
	}
	return helmInstallAgent(t, c, install)
}

// helmInstallAgent does what the helm install command install does.
func helmInstallAgent(t *testing.T, c *membercluster.Cluster, install helmInstall) installedAgent {
	t.Helper()
	member, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	if install.chart != "charts/flotilla-agent" || !install.createNamespace {
		t.Fatalf("printed command installs %q (create namespace %v), want charts/flotilla-agent with --create-namespace", install.chart, install.createNamespace)
	}
	// Test-only: the container shares the host's network here, so its
	// HTTP port must be a free one rather than the chart's 8080.
	httpPort := freePort(t, freeport.TCP)
	sets := append(slices.Clone(install.sets), "http.port="+strconv.Itoa(httpPort))
	manifests, err := renderChart(t, install.chart, install.release, install.namespace, sets)
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeManifests(t, manifests)
	applyObjects(t, c, install.namespace, objs)

	var d appsv1.Deployment
	findObject(t, objs, "Deployment", "", &d)
	if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, "ghcr.io/flotilla-io/flotilla-agent:") {
		t.Fatalf("the chart's image is %q, not the flotilla-agent image this test runs", img)
	}
	pod := controllerPod(t, member, install.namespace, d.Spec.Selector)
	ctr := startPod(t, c, pod, agentImage())
	if slices.ContainsFunc(ctr.Args, func(a string) bool { return strings.HasPrefix(a, "--kubeconfig") || strings.HasPrefix(a, "--cert-dir") }) {
		t.Fatalf("the chart's args use a kubeconfig or cert dir: %q", ctr.Args)
	}
	return installedAgent{helm: install, deployment: d, pod: pod, container: ctr, httpPort: httpPort, objects: objs}
}

// workOf is the Work of a cluster holding the object of kind and name, or
// nil.
func workOf(t *testing.T, h *hub, cluster, kind, name string) *v1alpha1.Work {
	t.Helper()
	var works v1alpha1.WorkList
	h.getJSON(t, "/apis/flotilla.io/v1alpha1/namespaces/"+v1alpha1.ExecutionNamespace(cluster)+"/works", &works)
	for i, w := range works.Items {
		for _, m := range w.Spec.Workload.Manifests {
			var obj struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if json.Unmarshal(m.Raw, &obj) == nil && obj.Kind == kind && obj.Metadata.Name == name {
				return &works.Items[i]
			}
		}
	}
	return nil
}

func workApplied(w *v1alpha1.Work) *metav1.Condition {
	if w == nil {
		return nil
	}
	return meta.FindStatusCondition(w.Status.Conditions, v1alpha1.WorkConditionApplied)
}

func describeWork(w *v1alpha1.Work) string {
	if w == nil {
		return "<no work>"
	}
	cond := workApplied(w)
	if cond == nil {
		return w.Name + ": no Applied condition"
	}
	return fmt.Sprintf("%s: Applied=%s %s: %s", w.Name, cond.Status, cond.Reason, cond.Message)
}

// argValue is the value of --name=value in args.
func argValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

func keysOf(s *corev1.Secret) []string {
	if s == nil {
		return nil
	}
	var keys []string
	for k := range s.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func holder(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return "<none>"
	}
	return *l.Spec.HolderIdentity
}

// checkPodProcess checks the running program from the host's side: the
// user and privileges its securityContext asks for, the downward-API
// environment and nothing inherited, a read-only root holding only the
// image and the Pod's volumes, the service-account token mounted.
func checkPodProcess(t *testing.T, ctr *podrun.Container, pod *corev1.Pod) {
	t.Helper()
	var pid int
	waitFor(t, 30*time.Second, "the container's program", func() (bool, string) {
		var err error
		pid, err = ctr.ProgramPID()
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	proc := func(name string) string {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	status := map[string]string{}
	for line := range strings.Lines(proc("status")) {
		k, v, _ := strings.Cut(line, ":")
		status[k] = strings.Join(strings.Fields(v), " ")
	}
	for k, want := range map[string]string{"Uid": "65532 65532 65532 65532", "Gid": "65532 65532 65532 65532", "Groups": "", "NoNewPrivs": "1", "CapEff": "0000000000000000", "CapPrm": "0000000000000000"} {
		if status[k] != want {
			t.Errorf("/proc/%d/status %s: %q, want %q", pid, k, status[k], want)
		}
	}
	environ := strings.Split(strings.TrimRight(proc("environ"), "\x00"), "\x00")
	if !slices.Equal(environ, ctr.Env) {
		t.Errorf("the program's environment %q, want exactly %q", environ, ctr.Env)
	}
	for _, e := range pod.Spec.Containers[0].Env {
		want := e.Name + "=" + e.Value
		if ref := e.ValueFrom; ref != nil && ref.FieldRef != nil {
			want = e.Name + "=" + map[string]string{"metadata.name": pod.Name, "metadata.namespace": pod.Namespace}[ref.FieldRef.FieldPath]
		}
		if !slices.Contains(environ, want) {
			t.Errorf("the program's environment lacks %s", want)
		}
	}
	mounts := map[string]string{} // mount point → options
	for line := range strings.Lines(proc("mountinfo")) {
		f := strings.Fields(line)
		mounts[f[4]] = f[5]
	}
	for _, vm := range pod.Spec.Containers[0].VolumeMounts {
		if _, ok := mounts[vm.MountPath]; !ok {
			t.Errorf("volume %s is not mounted at %s: %v", vm.Name, vm.MountPath, mounts)
		}
		if vm.ReadOnly && !strings.HasPrefix(mounts[vm.MountPath], "ro") {
			t.Errorf("volume %s at %s is %s, want read-only", vm.Name, vm.MountPath, mounts[vm.MountPath])
		}
	}
	if !strings.HasPrefix(mounts["/"], "ro") {
		t.Errorf("the root is mounted %q, want read-only", mounts["/"])
	}
	root := fmt.Sprintf("/proc/%d/root", pid)
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		// The image (usr, tmp, and the libraries of a dynamically linked
		// test build), /dev, /proc and the volumes' parents.
		if !slices.Contains([]string{"usr", "tmp", "lib", "lib64", "dev", "proc", "var"}, e.Name()) {
			t.Errorf("the container's root holds /%s, which neither the image nor the pod has", e.Name())
		}
	}
	// A service-account token only where admission mounted one.
	const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	token, err := os.ReadFile(filepath.Join(root, saDir, "token"))
	mounted := slices.ContainsFunc(pod.Spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == saDir })
	switch {
	case mounted && (err != nil || len(token) == 0):
		t.Errorf("service-account token: %v", err)
	case !mounted && !os.IsNotExist(err):
		t.Errorf("the pod mounts no service-account token, yet the container has one (%v)", err)
	}
}
