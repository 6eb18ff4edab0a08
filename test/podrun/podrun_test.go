package podrun

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/test/membercluster"
)

// probeEnv makes the test binary, run as a container's program, print what
// it sees instead of running the tests.
const probeEnv = "PODRUN_TEST_PROBE"

func TestMain(m *testing.M) {
	if os.Getenv(probeEnv) != "" {
		os.Exit(probe())
	}
	os.Exit(m.Run())
}

// probe reports, one line each, its user, whether / is writable, a
// mounted Secret, and who the API server says it is with the in-cluster
// configuration; then waits for SIGTERM.
func probe() int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	fmt.Printf("uid=%d gid=%d groups=%v\n", os.Getuid(), os.Getgid(), must(os.Getgroups()))
	err := os.WriteFile("/probe", nil, 0o600)
	fmt.Printf("root writable: %v\n", err == nil)
	secret, err := os.ReadFile("/etc/probe/greeting")
	fmt.Printf("secret: %q %v\n", secret, err)
	entries, _ := os.ReadDir("/")
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	fmt.Printf("root: %s\n", strings.Join(names, ","))
	cfg, err := rest.InClusterConfig()
	if err != nil {
		fmt.Printf("in-cluster config: %v\n", err)
		return 1
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Printf("client: %v\n", err)
		return 1
	}
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		fmt.Printf("self subject review: %v\n", err)
		return 1
	}
	fmt.Printf("user: %s\n", review.Status.UserInfo.Username)
	<-sigs
	fmt.Println("got SIGTERM")
	return 0
}

func must[T any](v T, err error) T {
	if err != nil {
		fmt.Println(err)
	}
	return v
}

// TestStart runs the test binary as a container of a real Pod (stored by
// a real kube-apiserver, its token volume added by admission) and checks
// what it sees, that SIGTERM reaches it, and that a kill leaves nothing.
func TestStart(t *testing.T) {
	if os.Getenv("FLOTILLA_TESTBIN") == "" {
		t.Fatal("FLOTILLA_TESTBIN is not set: this test needs a kube-apiserver from it (make testbin)")
	}
	env, err := membercluster.Start(t.Context(), membercluster.Options{Dir: t.TempDir(), Clusters: membercluster.Specs(1), APIServerOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	c := env.Cluster("member-1")
	client, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	pod := createProbePod(t, client, c)
	u, err := url.Parse(c.Server)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	start := func() *Container {
		dir := t.TempDir()
		ctr, err := Start(t.Context(), Spec{
			Pod: pod, Client: client, APIServer: u.Host, Dir: dir, LogPath: filepath.Join(dir, "log"),
			Image: Image{Entrypoint: []string{"/probe"}, Binaries: map[string]string{"/probe": self}, User: 1000, Group: 1000},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ctr.Kill() })
		return ctr
	}

	ctr := start()
	log := waitLog(t, ctr, "user: ")
	for _, want := range []string{
		"uid=4242 gid=4242 groups=[]\n", // runAsUser/Group of the pod
		"root writable: false\n",
		`secret: "hello" <nil>`,
		"user: system:serviceaccount:probe:prober\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the probe's output lacks %q:\n%s", want, log)
		}
	}
	// Only the image (with a dynamically linked build's libraries), /dev,
	// /proc and the volumes' mount points: no host files, no /tmp.
	_, rootLine, _ := strings.Cut(log, "root: ")
	rootLine, _, _ = strings.Cut(rootLine, "\n")
	for _, name := range strings.Split(rootLine, ",") {
		if !slices.Contains([]string{"dev", "etc", "lib", "lib64", "usr", "proc", "probe", "var"}, name) {
			t.Errorf("the container's root holds /%s (all: %s)", name, rootLine)
		}
	}
	if !strings.Contains(strings.Join(ctr.Env, "\n"), "POD_NAME=probe-pod") {
		t.Errorf("env %q lacks POD_NAME", ctr.Env)
	}
	if err := ctr.Stop(); err != nil {
		t.Fatal(err)
	}
	// It exited by itself, with status 0, through the whole chain.
	if log := waitLog(t, ctr, "got SIGTERM"); !strings.Contains(ctr.ExitError().Error(), "exited (<nil>)") {
		t.Errorf("after SIGTERM: %v\n%s", ctr.ExitError(), log)
	}

	// A crash of the runner takes the program with it.
	ctr = start()
	waitLog(t, ctr, "user: ")
	pid, err := ctr.ProgramPID()
	if err != nil {
		t.Fatal(err)
	}
	if err := ctr.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the program (pid %d) outlived its killed runner", pid)
		}
		time.Sleep(20 * time.Millisecond) // polling a process we do not own
	}
}

// waitLog polls the container's log until it holds want, and returns it.
func waitLog(t *testing.T, ctr *Container, want string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, _ := os.ReadFile(ctr.LogPath)
		if strings.Contains(string(data), want) {
			return string(data)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the container's log:\n%s", want, data)
		}
		time.Sleep(20 * time.Millisecond) // polling a real process's output
	}
}

// createProbePod stores a ServiceAccount, the root CA ConfigMap (the
// controller-manager's job, absent here), a Secret and a Pod that mounts
// it, runs the probe and takes its name from the downward API.
func createProbePod(t *testing.T, client kubernetes.Interface, c *membercluster.Cluster) *corev1.Pod {
	t.Helper()
	ctx := t.Context()
	ca, err := os.ReadFile(filepath.Join(filepath.Dir(c.Kubeconfig), "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	ns := "probe"
	create := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	create(err)
	_, err = client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prober"}}, metav1.CreateOptions{})
	create(err)
	_, err = client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": string(ca)}}, metav1.CreateOptions{})
	create(err)
	_, err = client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "greeting"}, Data: map[string][]byte{"greeting": []byte("hello")}}, metav1.CreateOptions{})
	create(err)
	pod, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe-pod"},
		Spec: corev1.PodSpec{
			ServiceAccountName: "prober",
			SecurityContext:    &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](4242), RunAsGroup: ptr.To[int64](4242), FSGroup: ptr.To[int64](4242), RunAsNonRoot: ptr.To(true)},
			Containers: []corev1.Container{{
				Name: "probe", Image: "probe:test",
				Env: []corev1.EnvVar{
					{Name: probeEnv, Value: "1"},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				},
				SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false)},
				VolumeMounts:    []corev1.VolumeMount{{Name: "greeting", MountPath: "/etc/probe", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "greeting", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "greeting", DefaultMode: ptr.To[int32](0o440)}}}},
		},
	}, metav1.CreateOptions{})
	create(err)
	if len(pod.Spec.Volumes) != 2 {
		t.Fatalf("admission did not add the token volume: %+v", pod.Spec.Volumes)
	}
	return pod
}

// TestExpand: $(VAR) references as Kubernetes expands them.
func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "x", "B": "y"}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	tests := map[string]string{
		"plain":        "plain",
		"$(A)":         "x",
		"--a=$(A)$(B)": "--a=xy",
		"$$(A)":        "$(A)",
		"$(C)":         "$(C)",
		"$(A":          "$(A",
		"cost $5":      "cost $5",
		"end$":         "end$",
	}
	for in, want := range tests {
		if got := expand(in, lookup); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestResolveSecurity: the container's fields win over the pod's; what
// cannot be honoured is refused.
func TestResolveSecurity(t *testing.T) {
	img := Image{User: 65532, Group: 65532}
	tests := []struct {
		name    string
		pod     *corev1.PodSecurityContext
		ctr     *corev1.SecurityContext
		want    security
		wantErr string
	}{
		{name: "image user", want: security{uid: 65532, gid: 65532, noNewPrivs: true}},
		{name: "container over pod", pod: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1), FSGroup: ptr.To[int64](7)},
			ctr:  &corev1.SecurityContext{RunAsUser: ptr.To[int64](2), ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(true)},
			want: security{uid: 2, gid: 65532, fsGroup: ptr.To[int64](7), groups: []int64{7}, readOnlyRoot: true}},
		{name: "runAsNonRoot with uid 0", pod: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)}, wantErr: "runAsNonRoot"},
		{name: "root", ctr: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)}, wantErr: "root"},
		{name: "privileged", ctr: &corev1.SecurityContext{Privileged: ptr.To(true)}, wantErr: "privileged"},
		{name: "added capability", ctr: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}, wantErr: "NET_ADMIN"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: tc.pod}}
			got, err := resolveSecurity(pod, &corev1.Container{SecurityContext: tc.ctr}, img)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(security{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
