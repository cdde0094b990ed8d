// Command starter starts meshroll roll-out plans for merges and reads,
// approves, pauses, resumes and aborts them. The commands live in
// internal/cli so that tests drive the same code in process; this main only
// wires the process's streams and signals and turns the result into an exit
// code (0 ok, 1 error, 2 usage, 3 a --wait plan that halted, was refused or
// was aborted). Those codes are the built binary's: `go run` reports every
// failure as 1.
//
//	go build -o bin/ ./starter
//	bin/starter merge --module host --commit <sha> [--gate 2] [--wait]
//	bin/starter plan show plan/host/<sha>
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/meshroll/meshroll/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starter:", err)
	}
	os.Exit(cli.ExitCode(err))
}
