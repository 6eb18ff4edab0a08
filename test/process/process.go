// Package process runs the child processes of tests and the demo: each in
// its own process group, killed if the process that started it dies, with
// its output in a log file, and stoppable and restartable with the same
// arguments.
package process

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

// StopTimeout is how long a process gets to exit after SIGTERM before SIGKILL.
const StopTimeout = 10 * time.Second

// Process is one child: a binary, its arguments and its log file. It can be
// started again after it stopped, with the same arguments. Its methods are
// meant for one goroutine at a time.
type Process struct {
	Name    string // for errors and logs, e.g. "cluster-1/kube-apiserver"
	Binary  string
	Args    []string
	LogPath string
	Env     []string // added to this process's environment

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	err    error         // cmd.Wait result, valid after exited is closed
}

// Start launches the process. Its output goes to logPath (appended, so a
// restart keeps the earlier log). The child is killed if this process dies,
// so an interrupted test leaves nothing behind.
func (p *Process) Start() error {
	if p.cmd != nil && !p.HasExited() {
		return fmt.Errorf("start %s: already running as pid %d", p.Name, p.cmd.Process.Pid)
	}
	logFile, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(p.Binary, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // a terminal's Ctrl-C reaches us, and we stop children in order
		Pdeathsig: syscall.SIGKILL, // nothing outlives a killed test binary
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.cmd = cmd
	p.exited = make(chan struct{})
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return nil
}

// HasExited reports whether the process ran and has ended.
func (p *Process) HasExited() bool {
	if p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM, waits up to stopTimeout, then SIGKILL. It returns once
// the process is gone. Stopping a stopped process is a no-op.
func (p *Process) Stop() error {
	if p.cmd == nil || p.HasExited() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", p.Name, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(StopTimeout):
	}
	return p.Kill()
}

// Kill sends SIGKILL and returns once the process is gone, like a crash.
func (p *Process) Kill() error {
	if p.cmd == nil || p.HasExited() {
		return nil
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", p.Name, err)
	}
	<-p.exited
	return nil
}

// Pid returns the process id of the running process, or 0.
func (p *Process) Pid() int {
	if p.cmd == nil || p.HasExited() {
		return 0
	}
	return p.cmd.Process.Pid
}

// Exited is closed when the process started last has ended.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitError describes how the process ended, with the tail of its log, for
// errors raised when a component dies during start-up.
func (p *Process) ExitError() error {
	return fmt.Errorf("%s exited (%v); last log lines:\n%s", p.Name, p.err, TailFile(p.LogPath, 20))
}

// TailFile returns the last n lines of a file, or a note why it cannot.
func TailFile(path string, n int) string {
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
