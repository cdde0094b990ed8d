//go:build !unix

package execrt

import (
	"fmt"
	"os"
	"syscall"
)

// Without Unix process groups and signals the runtime cannot stop what it
// starts; New refuses to run there (see unsupported).
const (
	sigTerm = syscall.Signal(15)
	sigKill = syscall.Signal(9)
)

const unsupported = "runtime exec needs a Unix system (process groups and signals)"

func sysProcAttr() *syscall.SysProcAttr { return nil }

func signalGroup(pid int, _ syscall.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

func exitReason(ps *os.ProcessState) string {
	if ps == nil {
		return "exit status unknown"
	}
	return fmt.Sprintf("exit code %d", ps.ExitCode())
}
