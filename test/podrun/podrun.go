// Package podrun runs one container of a Pod the way a kubelet would, with
// no container runtime: tests take a Pod as the API server stored it (after
// admission added its service-account volume), and podrun starts the
// container's program with the container's command, args and environment,
// as the user its securityContext names (no capabilities, no_new_privs,
// read-only root when asked), in private mount, PID and UTS namespaces
// (host name: the pod's) whose root holds only the image's files and the
// Pod's volumes (Secrets, ConfigMaps, projected service-account tokens,
// downward API, emptyDirs) at their mount paths. The program finds the API server through
// KUBERNETES_SERVICE_HOST/PORT and its credentials in the mounted token, as
// in a real Pod; it needs no kubeconfig or test-only flag.
//
// What differs from a node, on purpose: the container shares the host's
// network (KUBERNETES_SERVICE_HOST is the API server's loopback address, the
// Pod IP is 127.0.0.1, so two containers must not listen on one port); a
// PersistentVolumeClaim is a fresh empty tmpfs; tokens are requested once
// (no refresh: tests last less than their hour); a dynamically linked
// binary gets its ELF interpreter and libraries bind-mounted read-only, as
// a base image would provide them; a small shell is PID 1 of the namespace
// (it passes SIGTERM on, and its death kills the program), so the program
// is not PID 1; supplementary groups other than the primary one and added
// capabilities are refused rather than ignored.
//
// It needs root and util-linux (unshare, setpriv, mount).
package podrun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/test/process"
)

// Image is what the container image would hold.
type Image struct {
	// Entrypoint is the image's ENTRYPOINT, used when the container has no
	// command; its first element is a path in Binaries.
	Entrypoint []string
	// Binaries maps paths in the image to host files bind-mounted there
	// read-only (mode as on the host).
	Binaries map[string]string
	// Dirs are directories of the image with their modes, e.g. /tmp.
	Dirs map[string]os.FileMode
	// User and Group are the image's USER, used when the securityContext
	// sets no runAsUser / runAsGroup.
	User, Group int64
	// Env is the image's environment, KEY=VALUE.
	Env []string
}

// Spec says which container of which Pod to run, and how to reach the
// cluster it belongs to.
type Spec struct {
	// Pod as stored by the API server: its UID binds requested tokens.
	Pod *corev1.Pod
	// Container is the container's name; empty means the first one.
	Container string
	Image     Image
	// Client reads the Secrets and ConfigMaps of volumes and env, and
	// requests service-account tokens (an admin client, as the kubelet's
	// node rights would allow).
	Client kubernetes.Interface
	// APIServer is the cluster's API server HOST:PORT, given to the
	// program as KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT; its
	// serving certificate must be valid for HOST.
	APIServer string
	// PodIP is status.podIP for the downward API (default 127.0.0.1).
	PodIP string
	// Dir is a private host folder for the staged volumes and the root.
	Dir string
	// LogPath receives the program's output.
	LogPath string
	// ExtraEnv is appended to the container's environment (test-only
	// settings; the caller says why each is needed).
	ExtraEnv []string
}

// Container is a running container.
type Container struct {
	*process.Process
	// Args is the program's full argv after $(VAR) expansion.
	Args []string
	// Env is the program's environment (nothing else is inherited).
	Env []string
}

// Start prepares the container's filesystem and environment and starts it.
func Start(ctx context.Context, s Spec) (*Container, error) {
	if s.Pod == nil {
		return nil, errors.New("podrun: no pod")
	}
	if err := checkHost(); err != nil {
		return nil, err
	}
	if s.PodIP == "" {
		s.PodIP = "127.0.0.1"
	}
	c, err := findContainer(s.Pod, s.Container)
	if err != nil {
		return nil, err
	}
	ctxName := fmt.Sprintf("podrun %s/%s[%s]", s.Pod.Namespace, s.Pod.Name, c.Name)
	sec, err := resolveSecurity(s.Pod, c, s.Image)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ctxName, err)
	}
	env, err := containerEnv(ctx, s, c)
	if err != nil {
		return nil, fmt.Errorf("%s: env: %w", ctxName, err)
	}
	argv, err := containerArgv(s.Image, c, env)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ctxName, err)
	}
	if err := os.MkdirAll(filepath.Join(s.Dir, "rootfs"), 0o700); err != nil {
		return nil, fmt.Errorf("%s: %w", ctxName, err)
	}
	mounts, err := stageVolumesWhenPresent(ctx, s, c, sec.fsGroup)
	if err != nil {
		return nil, fmt.Errorf("%s: volumes: %w", ctxName, err)
	}
	binds, err := imageBinds(s.Image)
	if err != nil {
		return nil, fmt.Errorf("%s: image: %w", ctxName, err)
	}
	wd := c.WorkingDir
	if wd == "" {
		wd = "/"
	}
	script, err := runScript(scriptInput{
		hostname: podHostname(s.Pod), root: filepath.Join(s.Dir, "rootfs"), binds: binds, dirs: s.Image.Dirs, mounts: mounts,
		readOnlyRoot: sec.readOnlyRoot, noNewPrivs: sec.noNewPrivs, uid: sec.uid, gid: sec.gid, groups: sec.groups,
		wd: wd, env: env, argv: argv,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ctxName, err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "run.sh"), []byte(script), 0o700); err != nil {
		return nil, fmt.Errorf("%s: %w", ctxName, err)
	}
	p := &process.Process{
		Name:   ctxName,
		Binary: "unshare",
		// The shell is PID 1 of a new PID namespace: when it dies (or the
		// unshare above it, which kills it), the kernel kills the program.
		Args:    []string{"--mount", "--propagation", "private", "--uts", "--pid", "--fork", "--kill-child=SIGKILL", "/bin/sh", filepath.Join(s.Dir, "run.sh")},
		LogPath: s.LogPath,
	}
	if err := p.Start(); err != nil {
		return nil, err
	}
	return &Container{Process: p, Args: argv, Env: env}, nil
}

// Stop ends the container as a kubelet does: SIGTERM to the program, then
// SIGKILL after process.StopTimeout. (unshare ignores SIGTERM, so the
// signal goes to the process group, where the PID-1 shell passes it on.)
func (c *Container) Stop() error {
	pid := c.Pid()
	if pid == 0 {
		return nil
	}
	if err := syscall.Kill(-pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop %s: %w", c.Name, err)
	}
	select {
	case <-c.Exited():
		return nil
	case <-time.After(process.StopTimeout):
	}
	return c.Kill()
}

// volumeWait is how long a volume's missing Secret or ConfigMap is waited
// for: the kubelet, too, retries mounting until they exist (the
// controller-manager publishes kube-root-ca.crt into a new namespace a
// moment after it is created).
const volumeWait = 30 * time.Second

// stageVolumesWhenPresent stages the volumes, again while a source is
// missing, for up to volumeWait.
func stageVolumesWhenPresent(ctx context.Context, s Spec, c *corev1.Container, fsGroup *int64) ([]mount, error) {
	var mounts []mount
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, volumeWait, true, func(ctx context.Context) (bool, error) {
		if err := os.RemoveAll(filepath.Join(s.Dir, "volumes")); err != nil {
			return false, err
		}
		mounts, last = stageVolumes(ctx, s, c, fsGroup)
		if apierrors.IsNotFound(last) {
			return false, nil
		}
		return true, last
	})
	if last != nil {
		return nil, last
	}
	return mounts, err
}

// checkHost says clearly what this machine lacks to run containers.
func checkHost() error {
	if os.Geteuid() != 0 {
		return errors.New("podrun: needs root (mount, PID and UTS namespaces, tmpfs mounts)")
	}
	for _, tool := range []string{"/usr/bin/unshare", "/usr/bin/setpriv", "/usr/bin/env", "/bin/sh"} {
		if _, err := os.Stat(tool); err != nil {
			return fmt.Errorf("podrun: needs %s (Debian: util-linux, coreutils): %w", tool, err)
		}
	}
	for _, tool := range []string{"mount", "hostname", "cp", "mkdir", "touch", "chmod"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("podrun: needs %s: %w", tool, err)
		}
	}
	return nil
}

// podHostname is the host name a kubelet gives the pod's containers.
func podHostname(pod *corev1.Pod) string {
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	return pod.Name
}

func findContainer(pod *corev1.Pod, name string) (*corev1.Container, error) {
	for i := range pod.Spec.Containers {
		if name == "" || pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i], nil
		}
	}
	return nil, fmt.Errorf("podrun %s/%s: no container %q", pod.Namespace, pod.Name, name)
}

// serviceEnv is what the kubelet gives every container about the
// kubernetes Service, pointing at the API server itself.
func serviceEnv(apiServer string) ([]corev1.EnvVar, error) {
	host, port, err := net.SplitHostPort(apiServer)
	if err != nil {
		return nil, fmt.Errorf("API server address %q: %w", apiServer, err)
	}
	if _, err := strconv.Atoi(port); err != nil {
		return nil, fmt.Errorf("API server address %q: port: %w", apiServer, err)
	}
	return []corev1.EnvVar{
		{Name: "KUBERNETES_SERVICE_HOST", Value: host},
		{Name: "KUBERNETES_SERVICE_PORT", Value: port},
		{Name: "KUBERNETES_SERVICE_PORT_HTTPS", Value: port},
		{Name: "KUBERNETES_PORT", Value: "tcp://" + apiServer},
	}, nil
}

// ProgramPID is the host PID of the container's program: the child of the
// PID-1 shell, itself the child of unshare. It is an error until the
// program runs (after the shell built the root and the exec chain ended).
func (c *Container) ProgramPID() (int, error) {
	pid := c.Pid()
	if pid == 0 {
		return 0, fmt.Errorf("%s is not running", c.Name)
	}
	for range 2 {
		child, err := onlyChild(pid)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", c.Name, err)
		}
		pid = child
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", c.Name, err)
	}
	want := path.Base(c.Args[0])
	if len(want) > 15 { // TASK_COMM_LEN
		want = want[:15]
	}
	if got := strings.TrimSpace(string(comm)); got != want {
		return 0, fmt.Errorf("%s: process %d is %s, not yet %s", c.Name, pid, got, want)
	}
	return pid, nil
}

// onlyChild is the one child process of pid.
func onlyChild(pid int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(data))
	if len(fields) != 1 {
		return 0, fmt.Errorf("process %d has children %v, want one", pid, fields)
	}
	return strconv.Atoi(fields[0])
}
