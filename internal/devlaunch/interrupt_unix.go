//go:build unix

package devlaunch

import "os"

// interrupt asks a process to stop as Ctrl-C would.
func interrupt(p *os.Process) error { return p.Signal(os.Interrupt) }
