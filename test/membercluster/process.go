package membercluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// stopTimeout is how long a process gets to exit after SIGTERM before SIGKILL.
const stopTimeout = 10 * time.Second

// process is one child: a binary, its arguments and its log file. It can be
// started again after it stopped, with the same arguments.
type process struct {
	name    string // for errors and logs, e.g. "cluster-1/kube-apiserver"
	binary  string
	args    []string
	logPath string

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	err    error         // cmd.Wait result, valid after exited is closed
}

// start launches the process. Its output goes to logPath (appended, so a
// restart keeps the earlier log). The child is killed if this process dies,
// so an interrupted test leaves nothing behind.
func (p *process) start() error {
	if p.cmd != nil && !p.hasExited() {
		return fmt.Errorf("start %s: already running as pid %d", p.name, p.cmd.Process.Pid)
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(p.binary, p.args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // a terminal's Ctrl-C reaches us, and we stop children in order
		Pdeathsig: syscall.SIGKILL, // nothing outlives a killed test binary
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd = cmd
	p.exited = make(chan struct{})
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return nil
}

func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits up to stopTimeout, then SIGKILL. It returns once
// the process is gone. Stopping a stopped process is a no-op.
func (p *process) stop() error {
	if p.cmd == nil || p.hasExited() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(stopTimeout):
	}
	return p.kill()
}

// kill sends SIGKILL and returns once the process is gone, like a crash.
func (p *process) kill() error {
	if p.cmd == nil || p.hasExited() {
		return nil
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", p.name, err)
	}
	<-p.exited
	return nil
}

// pid returns the process id of the running process, or 0.
func (p *process) pid() int {
	if p.cmd == nil || p.hasExited() {
		return 0
	}
	return p.cmd.Process.Pid
}

// exitError describes how the process ended, with the tail of its log, for
// errors raised when a component dies during start-up.
func (p *process) exitError() error {
	return fmt.Errorf("%s exited (%v); last log lines:\n%s", p.name, p.err, tailFile(p.logPath, 20))
}

// tailFile returns the last n lines of a file, or a note why it cannot.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", filepath.Base(path), err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
