// Command bench measures meshroll's orchestration against baselines in the
// same run, on a Temporal server, host agents and worker it starts itself,
// and prints one table (docs/benchmarks.md explains each figure). The
// server is the Temporal CLI's dev server, or with -server production the
// production topology's temporal-server on PostgreSQL, configured as
// deploy/ configures it (package prodserver):
//
//	go run ./internal/bench -size smoke           # about a minute or two
//	go run ./internal/bench -size full -runs 3    # the published table
//	go run ./internal/bench -pprof /tmp/prof      # CPU and heap profiles
//	go run ./internal/bench -only fan-out -local-push  # pushes as local activities (push.local_activity)
//	go run ./internal/bench -only fan-out -machines 3 -runtime docker  # push to healthy on a real engine
//	go run ./internal/bench -only fan-out -machines 3,100 -server production  # on temporal-server and PostgreSQL ($MESHROLL_TEST_POSTGRES_DSN)
//
// Scenarios: overhead (one machine, plan against a direct Go loop), fan-out
// (3, 10, 100 and 1,000 machines in three tiers), batched (one tier of 100
// machines pushed 10 at a time, each waiting min_healthy, against the sum of
// those waits), contention (plans to one machine against a signal-based
// mutex), cost (history events and billable actions), footprint (a worker
// process's peak RSS and CPU per plan), the engine's own ceiling for
// no-op activities, and the fleet page's matrix over 1,000 machines (how
// long it takes to load, how big it is).
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/bench/stack"
	"github.com/meshroll/meshroll/internal/catalogue/sqlcat"
	"github.com/meshroll/meshroll/internal/config"
)

func main() {
	if stack.ChildRequested() {
		if err := stack.RunChild(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	var o Options
	flag.StringVar(&o.Size, "size", SizeSmoke, "smoke (smallest sizes, one run) or full")
	flag.IntVar(&o.Runs, "runs", 0, "repetitions of each scenario (default 1 for smoke, 3 for full)")
	flag.StringVar(&o.Histories, "histories", "", "directory for the history of every fan-out plan and its machine workflows, as JSON")
	flag.StringVar(&o.Pprof, "pprof", "", "directory for CPU and heap profiles of the bench process, the footprint worker and each fan-out size's worker (DIR/fan-out-N)")
	flag.BoolVar(&o.Verbose, "v", false, "progress and the SDK's warnings on stderr")
	only := flag.String("only", "", "comma-separated scenarios to run (overhead, fan-out, batched, contention, footprint, engine, fleet-page); default all")
	flag.IntVar(&o.FleetPage, "fleet-page", 0, "machines of the fleet-page scenario instead of the size's (10 smoke, 1,000 full)")
	machines := flag.String("machines", "", "comma-separated fan-out sizes instead of the size's (the first is the ideal the others are read against)")
	flag.StringVar(&o.Server.Kind, "server", stack.ServerDev, "the Temporal server measured: dev (the CLI's dev server, in memory) or production (temporal-server on PostgreSQL, configured as deploy/ configures it; scripts/install-temporal-server.sh installs it)")
	flag.StringVar(&o.Server.Postgres, "postgres", "", "the PostgreSQL of -server production: the DSN of a role that may create databases (default $"+stack.PostgresEnv+", which scripts/postgres-test.sh prints)")
	flag.StringVar(&o.Server.Root, "repo", "", "the meshroll repository whose deploy/ and docker-compose.yml configure -server production (default: found from the working directory, else from where the bench was built)")
	flag.StringVar(&o.Server.Compression, "grpc-compression", "", "the workers' temporal.grpc_compression: auto (default; none on loopback), none or gzip")
	noEager := flag.Bool("no-eager-activities", false, "turn the dev server's eager activity dispatch off, as servers up to 1.31 ship it")
	flag.StringVar(&o.Server.DBFile, "server-db", "", "the dev server's SQLite file instead of memory, to read the store after a run (a new path; on tmpfs, such as /dev/shm/bench.db, it costs little)")
	flag.BoolVar(&o.Server.OldMatcher, "old-matcher", false, "turn the dev server's priority task matcher off (matching.useNewMatcher=false, as servers up to 1.31 ship it)")
	flag.BoolVar(&o.Server.SACache, "sa-cache", false, "have the dev server keep search attributes and namespaces in its caches, as a production server does, instead of reading them from its store on every use (system.forceSearchAttributesCacheRefreshOnRead=false)")
	flag.BoolVar(&o.Server.LocalPush, "local-push", false, "set push.local_activity in the meshes: machine workflows push by local activities")
	flag.IntVar(&o.Server.HandWindow, "hand-window", 0, "set push.hand_window in the meshes (default: the config's default, 1000); above the largest tier, every push is handed over at once")
	flag.StringVar(&o.Runtime, "runtime", agent.RuntimeNoop, "the fan-out agents' runtime: noop, or exec or docker to run a real Go build's image (the other scenarios run noop)")
	flag.StringVar(&o.DockerSocket, "docker-socket", cmp.Or(os.Getenv("MESHROLL_TEST_DOCKER_SOCKET"), agent.DefaultDockerSocket), "the engine of -runtime docker (default $MESHROLL_TEST_DOCKER_SOCKET, which scripts/docker-test.sh prints, else the system's)")
	flag.Parse()
	switch o.Runtime {
	case agent.RuntimeNoop, agent.RuntimeExec, agent.RuntimeDocker:
	default:
		fmt.Fprintf(os.Stderr, "bench: -runtime: %q is not noop, exec or docker\n", o.Runtime)
		os.Exit(2)
	}
	o.Server.NoEagerActivities = *noEager
	if o.Server.Kind == stack.ServerProduction {
		o.Server.Postgres = cmp.Or(o.Server.Postgres, os.Getenv(stack.PostgresEnv))
	}
	if err := o.Server.Check(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}
	switch o.Server.Compression {
	case "", config.CompressionAuto, config.CompressionNone, config.CompressionGzip:
	default:
		fmt.Fprintf(os.Stderr, "bench: -grpc-compression: %q is not auto, none or gzip\n", o.Server.Compression)
		os.Exit(2)
	}
	if *only != "" {
		o.Only = strings.Split(*only, ",")
	}
	for _, f := range strings.FieldsFunc(*machines, func(r rune) bool { return r == ',' }) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: -machines: %q is not a machine count\n", f)
			os.Exit(2)
		}
		o.Machines = append(o.Machines, n)
	}
	o.Command = "go run ./internal/bench " + strings.Join(redactArgs(os.Args[1:]), " ")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	t, err := Run(ctx, o, os.Stderr)
	if t != nil {
		if werr := t.Write(os.Stdout); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// redactArgs is the command line with -postgres's password redacted: the
// command is printed above the table, which is published.
func redactArgs(args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case !strings.HasPrefix(a, "-") || name != "postgres":
		case hasValue:
			out[i] = a[:len(a)-len(value)] + sqlcat.RedactDSN(value)
		case i+1 < len(out):
			out[i+1] = sqlcat.RedactDSN(out[i+1])
		}
	}
	return out
}
