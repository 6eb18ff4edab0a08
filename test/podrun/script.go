package podrun

import (
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// bind is a host file bind-mounted read-only into the container's root.
type bind struct{ host, image string }

// libDirs are where a dynamically linked test binary's libraries are
// looked up on the host (and put in the root at the same path, where the
// loader's default search finds them).
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// imageBinds lists the image's binaries and, for dynamically linked ones,
// their ELF interpreter and libraries.
func imageBinds(img Image) ([]bind, error) {
	var binds []bind
	seen := map[string]bool{}
	var addLibs func(host string) error
	addLibs = func(host string) error {
		f, err := elf.Open(host)
		if err != nil {
			return fmt.Errorf("%s: %w", host, err)
		}
		defer f.Close()
		for _, p := range f.Progs {
			if p.Type != elf.PT_INTERP {
				continue
			}
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return fmt.Errorf("%s: interpreter: %w", host, err)
			}
			interp := strings.TrimRight(string(b), "\x00")
			if !seen[interp] {
				seen[interp] = true
				binds = append(binds, bind{host: interp, image: interp})
			}
		}
		libs, err := f.ImportedLibraries()
		if err != nil {
			return fmt.Errorf("%s: libraries: %w", host, err)
		}
		for _, lib := range libs {
			found := ""
			for _, dir := range libDirs {
				if _, err := os.Stat(filepath.Join(dir, lib)); err == nil {
					found = filepath.Join(dir, lib)
					break
				}
			}
			if found == "" {
				return fmt.Errorf("%s: library %s not found in %v", host, lib, libDirs)
			}
			if seen[found] {
				continue
			}
			seen[found] = true
			binds = append(binds, bind{host: found, image: found})
			if err := addLibs(found); err != nil {
				return err
			}
		}
		return nil
	}
	paths := make([]string, 0, len(img.Binaries))
	for p := range img.Binaries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if !path.IsAbs(p) {
			return nil, fmt.Errorf("binary path %q is not absolute", p)
		}
		binds = append(binds, bind{host: img.Binaries[p], image: p})
		if err := addLibs(img.Binaries[p]); err != nil {
			return nil, err
		}
	}
	return binds, nil
}

// scriptInput is everything the PID-1 shell needs.
type scriptInput struct {
	hostname     string
	root         string
	binds        []bind
	dirs         map[string]os.FileMode
	mounts       []mount
	readOnlyRoot bool
	noNewPrivs   bool
	uid, gid     int64
	groups       []int64
	wd           string
	env, argv    []string
}

// devices are the character devices a runtime gives every container.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// runScript is the shell script that, as PID 1 of fresh mount and PID
// namespaces (and its own UTS namespace, named as the pod), builds the container's root on a tmpfs, mounts the volumes,
// and runs the program in it as the container's user with nothing of the
// runner's environment; it passes SIGTERM on and exits with the program.
func runScript(in scriptInput) (string, error) {
	for _, g := range in.groups {
		if g != in.gid {
			// unshare --setgid drops supplementary groups.
			return "", fmt.Errorf("supplementary group %d (fsGroup or supplementalGroups) other than the primary group %d is not supported", g, in.gid)
		}
	}
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	at := func(p string) string { return q(in.root + p) }
	line("set -eu")
	line("hostname %s", q(in.hostname))
	line("mount -t tmpfs -o mode=0755 podroot %s", q(in.root))
	for _, bd := range in.binds {
		line("mkdir -p %s && touch %s", at(path.Dir(bd.image)), at(bd.image))
		line("mount --bind %s %s && mount -o remount,bind,ro %s", q(bd.host), at(bd.image), at(bd.image))
	}
	dirs := make([]string, 0, len(in.dirs))
	for d := range in.dirs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		line("mkdir -p %s && chmod %o %s", at(d), modeBits(in.dirs[d]), at(d))
	}
	line("mkdir -p %s %s", at("/dev"), at("/proc"))
	line("mount -t tmpfs -o mode=0755,nosuid,size=65536k dev %s", at("/dev"))
	for _, d := range devices {
		line("touch %s && mount --bind /dev/%s %s", at("/dev/"+d), d, at("/dev/"+d))
	}
	line("mount -t proc -o nosuid,nodev,noexec proc %s", at("/proc"))
	for _, m := range in.mounts {
		st, err := os.Stat(m.src)
		if err != nil {
			return "", err
		}
		gid := 0
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			gid = int(sys.Gid)
		}
		opts := fmt.Sprintf("mode=%o,uid=0,gid=%d,nosuid,nodev", modeBits(st.Mode()), gid)
		if m.size != "" {
			opts += ",size=" + m.size
		}
		line("mkdir -p %s && mount -t tmpfs -o %s volume %s", at(m.path), opts, at(m.path))
		line("cp -a %s/. %s/", q(m.src), at(m.path))
		if m.readOnly {
			line("mount -o remount,ro %s", at(m.path))
		}
	}
	if in.readOnlyRoot {
		line("mount -o remount,ro %s", q(in.root))
	}
	line("set +e")
	cmd := []string{"/usr/bin/env", "-i"}
	cmd = append(cmd, in.env...)
	if in.noNewPrivs {
		cmd = append(cmd, "/usr/bin/setpriv", "--no-new-privs")
	}
	cmd = append(cmd, "/usr/bin/unshare", "--root="+in.root, "--wd="+in.wd,
		"--setgid="+strconv.FormatInt(in.gid, 10), "--setuid="+strconv.FormatInt(in.uid, 10), "--")
	cmd = append(cmd, in.argv...)
	quoted := make([]string, len(cmd))
	for i, a := range cmd {
		quoted[i] = q(a)
	}
	line("%s &", strings.Join(quoted, " "))
	line("child=$!")
	line(`trap 'kill -TERM "$child" 2>/dev/null' TERM INT`)
	line(`while :; do wait "$child"; st=$?; kill -0 "$child" 2>/dev/null || exit "$st"; done`)
	return b.String(), nil
}

// modeBits is m as the octal digits chmod and tmpfs take.
func modeBits(m os.FileMode) uint32 {
	bits := uint32(m.Perm())
	if m&os.ModeSetuid != 0 {
		bits |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		bits |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		bits |= 0o1000
	}
	return bits
}

// q quotes s for the shell.
func q(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
