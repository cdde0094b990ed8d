// Package cmdrun runs the worker's and the host agent's command lines (one
// cobra command each, no subcommands) and maps what they return to the
// process's exit code: 0 ok, 1 failed, 2 usage (a flag or setting the
// command refused before starting anything).
//
// It exists so that the two commands and their mains share one usage error
// type, one exit-code mapping and one way of wiring cobra, instead of a copy
// in each. The starter keeps its own (package cli): it has subcommands and
// a fourth exit code, for a followed plan that ended badly.
package cmdrun

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/meshroll/meshroll/internal/logging"
)

// Exit codes. Scripts and supervisors branch on them, so a command line
// that can never work (2) is told from one that failed this time (1).
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// UsageError is a command line or setting the command refused before
// starting anything. It is a type, not a message, so that ExitCode can tell
// it apart (exit 2) without matching text.
type UsageError struct {
	Err error
}

func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap lets errors.Is/As see the cause.
func (e *UsageError) Unwrap() error { return e.Err }

// Usage marks err as a usage error; nil stays nil.
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return &UsageError{Err: err}
}

// Usagef is Usage of fmt.Errorf(format, args...).
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// ExitCode maps an error returned by Execute to the process's exit code, so
// that a main is a one-liner and the mapping is tested in one place.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ue *UsageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	return ExitError
}

// Execute runs cmd with args (without the program name) until ctx ends or
// it returns. The command writes through cmd.OutOrStdout and
// cmd.ErrOrStderr, which are stdout and stderr behind one lock, so that an
// in-process caller can pass buffers (even one buffer for both) while the
// command's goroutines log. --help prints cmd's help to stdout and returns
// nil; a flag cobra cannot parse returns a UsageError with cobra's words
// ("unknown flag: --colour"). Errors are returned, not printed: the main
// prints them after its program name. Execute never reads os.Args and
// never exits.
func Execute(ctx context.Context, cmd *cobra.Command, args []string, stdout, stderr io.Writer) error {
	if args == nil {
		args = []string{} // cobra falls back to os.Args on nil
	}
	streams := logging.SyncWriters(stdout, stderr)
	cmd.SetOut(streams[0])
	cmd.SetErr(streams[1])
	cmd.SetArgs(args)
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
	cmd.CompletionOptions.DisableDefaultCmd = true
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return Usage(err) })
	return cmd.ExecuteContext(ctx)
}
