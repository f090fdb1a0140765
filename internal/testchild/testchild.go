// Package testchild runs a test of the running test binary as a child
// process, for the tests that kill a process in the middle of its writes
// (SIGKILL) and then check what a reopened store holds.
package testchild

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// Child is the running child.
type Child struct {
	*exec.Cmd
	// Lines reads the child's standard output, line by line.
	Lines *bufio.Scanner
}

// Start runs the test binary again with only the test named test, and env
// ("NAME=value") added to the environment; the child's standard error goes
// to the test's.
//
// Under -short (CI's race stage) the test is skipped: a race the child
// meets fails no test, as the child is killed before it exits, and the run
// without -short has every such test.
func Start(t testing.TB, test string, env ...string) *Child {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: a child process killed in the middle of its writes")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return &Child{Cmd: cmd, Lines: bufio.NewScanner(out)}
}

// Kill sends the child SIGKILL.
func (c *Child) Kill(t testing.TB) {
	t.Helper()
	if err := c.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// WaitKilled waits for the child to end and fails the test unless SIGKILL
// ended it.
func (c *Child) WaitKilled(t testing.TB) {
	t.Helper()
	err := c.Wait()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v", err)
	}
}
