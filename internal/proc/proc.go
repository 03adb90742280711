// Package proc supervises service processes for the harnesses (eskvbench,
// eskvchaos) and the end-to-end process tests: it starts a built binary
// with its environment and a log file, waits until it is ready, kills
// (SIGKILL), pauses (SIGSTOP) and resumes (SIGCONT) it, starts it again
// with the same settings, and stops it (SIGTERM, then SIGKILL after a
// grace period).
package proc

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Spec is what a process is started with, every time.
type Spec struct {
	Name string // in errors and log markers
	Path string // the binary
	Args []string
	// Env is added to this process's environment without its ESKV_
	// variables (BaseEnv), so that the caller's settings are the only
	// ones the service sees; PassEnv names ESKV_ variables that go
	// through (e.g. ESKV_PPROF_ADDR).
	Env     []string
	PassEnv []string
	Dir     string // working directory; "" for the caller's
	Log     string // stdout and stderr are appended to this file
	URL     string // base URL of its HTTP listener, when known
	// NetNS, when set, runs the process in that network namespace
	// (ip netns exec, which execs it: the pid is the service's).
	NetNS string
	// OnExit, when set, is called with the exit error when the process
	// exits without Kill or Stop having been asked for.
	OnExit func(err error)
}

// State is what a process is doing.
type State int

// States of a process.
const (
	Exited  State = iota // not started yet, or exited
	Running              // started and not paused
	Paused               // stopped with SIGSTOP
)

// Proc is one service process; it can be killed, paused and started again
// with the same Spec.
type Proc struct {
	Spec

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	err      error // of the last exit
	state    State
	intended bool // Kill or Stop caused the current process to exit
	starts   int
}

// New returns the process of spec, not started.
func New(spec Spec) *Proc { return &Proc{Spec: spec} }

// Start starts the process of spec.
func Start(spec Spec) (*Proc, error) {
	p := New(spec)
	return p, p.Start()
}

// Start starts the process (again). Its output is appended to the log,
// a restart marked by a line "=== proc: start #n at TIME ===".
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != Exited {
		return fmt.Errorf("start %s: it is running", p.Name)
	}
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	p.starts++
	if p.starts > 1 {
		fmt.Fprintf(f, "=== proc: start #%d at %s ===\n", p.starts, time.Now().Format("15:04:05.000"))
	}
	cmd := exec.Command(p.Path, p.Args...)
	if p.NetNS != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", p.NetNS, p.Path}, p.Args...)...)
	}
	cmd.Env = append(BaseEnv(p.PassEnv...), p.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = p.Dir
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.state, p.intended, p.err = cmd, done, Running, false, nil
	go p.wait(cmd, f, done)
	return nil
}

func (p *Proc) wait(cmd *exec.Cmd, f *os.File, done chan struct{}) {
	err := cmd.Wait()
	f.Close()
	p.mu.Lock()
	p.err, p.state = err, Exited
	unexpected := !p.intended
	p.mu.Unlock()
	close(done)
	if unexpected && p.OnExit != nil {
		p.OnExit(err)
	}
}

// State reports what the process is doing.
func (p *Proc) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// Running reports whether the process runs and is not paused.
func (p *Proc) Running() bool { return p.State() == Running }

// Alive reports whether the process has not exited (it may be paused).
func (p *Proc) Alive() bool { return p.State() != Exited }

// Err is the exit error of the last run (nil while it runs).
func (p *Proc) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// PID is the process id of the last run, 0 before the first.
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Kill sends SIGKILL (no shutdown code runs) and waits for the exit.
func (p *Proc) Kill() {
	if done := p.signal(syscall.SIGKILL); done != nil {
		<-done
	}
}

// Pause stops the process with SIGSTOP: it keeps its sockets and state
// but runs no code until Resume.
func (p *Proc) Pause() { p.transition(Running, Paused, syscall.SIGSTOP) }

// Resume continues a paused process with SIGCONT.
func (p *Proc) Resume() { p.transition(Paused, Running, syscall.SIGCONT) }

func (p *Proc) transition(from, to State, sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == from && p.cmd.Process.Signal(sig) == nil {
		p.state = to
	}
}

// Stop resumes the process if paused, sends SIGTERM and waits up to grace
// for it to exit before SIGKILL.
func (p *Proc) Stop(grace time.Duration) {
	done := p.signal(syscall.SIGCONT, syscall.SIGTERM)
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-time.After(grace):
		p.Kill()
	}
}

// signal sends sigs to a live process, noting that its exit is asked
// for, and returns the channel closed at the exit (nil when not alive).
func (p *Proc) signal(sigs ...syscall.Signal) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == Exited {
		return nil
	}
	p.intended = true
	for _, s := range sigs {
		_ = p.cmd.Process.Signal(s)
	}
	return p.done
}

// StopAll stops the processes at the same time, each with Stop(grace), and
// returns once all have exited.
func StopAll(grace time.Duration, ps ...*Proc) {
	var wg sync.WaitGroup
	for _, p := range ps {
		if p != nil {
			wg.Go(func() { p.Stop(grace) })
		}
	}
	wg.Wait()
}
