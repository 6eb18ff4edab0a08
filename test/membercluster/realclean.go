package membercluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-io/flotilla/test/netbed"
)

// realStateRoot holds each real node's containerd and kubelet state, in a
// folder named like its namespace. It is short (containerd's socket path
// must fit in 108 bytes) and on disk (images and snapshots).
const realStateRoot = "/var/lib/flotilla-realnodes"

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cleanupTimeout bounds the removal of one node's leftovers.
const cleanupTimeout = 60 * time.Second

// cgroupHierarchies lists the mounted cgroup hierarchies (one folder per
// cgroup v1 controller, and the unified one).
func cgroupHierarchies() ([]string, error) {
	var dirs []string
	err := eachMount(func(mountPoint, fsType string) {
		if (fsType == "cgroup" || fsType == "cgroup2") && strings.HasPrefix(mountPoint, cgroupRoot) {
			dirs = append(dirs, mountPoint)
		}
	})
	return dirs, err
}

// createCgroup creates the cgroup /name in every hierarchy: a kubelet
// refuses a cgroupRoot that does not exist. A v1 cpuset cgroup starts with
// no CPUs and memory nodes, so it gets its parent's.
func createCgroup(name string) error {
	dirs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range dirs {
		dir := filepath.Join(h, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
			parent, err := os.ReadFile(filepath.Join(h, file))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(dir, file), parent, 0o644); err != nil {
				return fmt.Errorf("cgroup %s: %s: %w", dir, file, err)
			}
		}
	}
	return nil
}

// removeCgroup kills every process in the cgroup /name and its children,
// in every hierarchy, and removes the cgroups, innermost first.
func removeCgroup(ctx context.Context, name string) error {
	dirs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range dirs {
		top := filepath.Join(h, name)
		var tree []string
		_ = filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				tree = append(tree, path)
			}
			return nil
		})
		slices.Reverse(tree) // children before parents
		for _, dir := range tree {
			errs = append(errs, removeOneCgroup(ctx, dir))
		}
	}
	return errors.Join(errs...)
}

// removeOneCgroup kills the cgroup's processes until it is empty, then
// removes it; the kernel refuses to remove a cgroup while a process in it
// is still dying.
func removeOneCgroup(ctx context.Context, dir string) error {
	err := wait.PollUntilContextTimeout(ctx, readyPollPeriod, cleanupTimeout, true, func(context.Context) (bool, error) {
		for _, pid := range cgroupPids(dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		err := os.Remove(dir)
		return err == nil || errors.Is(err, fs.ErrNotExist), nil
	})
	if err != nil {
		return fmt.Errorf("remove cgroup %s (pids %v): %w", dir, cgroupPids(dir), err)
	}
	return nil
}

func cgroupPids(dir string) []int {
	data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killMentioning kills every process whose command line contains text: the
// containerd shims of a node (they name its socket, and outlive containerd
// by design), and its daemons after a crashed test.
func killMentioning(text string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(text)) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// unmountUnder detaches every mount below dir, innermost first: the
// kubelet's volumes, containerd's snapshots, shm and pod network
// namespaces.
func unmountUnder(dir string) error {
	var points []string
	if err := eachMount(func(mountPoint, _ string) {
		if strings.HasPrefix(mountPoint, dir+"/") {
			points = append(points, mountPoint)
		}
	}); err != nil {
		return err
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// eachMount calls f with the mount point and file system type of each
// mount of this process's mount namespace.
func eachMount(f func(mountPoint, fsType string)) error {
	mounts, err := mountinfo.GetMounts(nil)
	if err != nil {
		return fmt.Errorf("mounts: %w", err)
	}
	for _, m := range mounts {
		f(m.Mountpoint, m.FSType)
	}
	return nil
}

// cleanNode removes what a real node leaves on the host once its daemons
// are stopped (or dead): the processes of its containers and shims, its
// mounts, its cgroups, its network namespace and its state folder.
func cleanNode(ctx context.Context, name string) error {
	stateDir := filepath.Join(realStateRoot, name)
	killMentioning(stateDir)
	errs := []error{removeCgroup(ctx, name), unmountUnder(stateDir)}
	if _, err := os.Stat("/run/netns/" + name); err == nil {
		errs = append(errs, netbed.RunSteps(ctx, [][]string{{"ip", "netns", "del", name}}))
	}
	if err := os.RemoveAll(stateDir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", stateDir, err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("real node %s: cleanup: %w", name, err)
	}
	return nil
}

// sweepRealNodes removes the real nodes and bridges of test binaries that
// were killed before their cleanup ran; those of live ones stay.
func sweepRealNodes(ctx context.Context) error {
	names := map[string]bool{}
	for _, dir := range []string{realStateRoot, "/run/netns"} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			names[e.Name()] = true
		}
	}
	if dirs, err := cgroupHierarchies(); err == nil {
		for _, h := range dirs {
			entries, _ := os.ReadDir(h)
			for _, e := range entries {
				if e.IsDir() {
					names[e.Name()] = true
				}
			}
		}
	}
	var errs []error
	for name := range names {
		if netbed.Stale(realPrefix, name) {
			errs = append(errs, cleanNode(ctx, name))
		}
	}
	bridges, err := staleBridges(ctx)
	errs = append(errs, err)
	for _, b := range bridges {
		errs = append(errs, netbed.RunSteps(ctx, [][]string{{"ip", "link", "del", b}}))
	}
	return errors.Join(errs...)
}
