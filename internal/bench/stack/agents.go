package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/agent"
)

// EnvAgents names the spec file (agentsSpec, JSON) that turns the bench
// binary into an agents process.
const EnvAgents = "MESHROLL_BENCH_AGENTS"

// AgentsPerProcess is the most noop agents one process serves by default
// (MeshOptions.AgentsPerProcess). Each holds
// about five descriptors (its lock, its journal, its listener, the
// connections a push opens), and a process here may hold 20,000, so a
// fleet of 10,000 is served by several processes; a fleet this size or
// smaller, by the bench process itself.
const AgentsPerProcess = 2000

// agentsSpec is what an agents process serves: noop agents for Machines,
// each with its state under Dir/hosts/<machine>.
type agentsSpec struct {
	Dir      string
	Machines []string
}

// agentLinePrefix starts each line an agents process prints for an agent
// it serves: "agent <machine> <url>".
const agentLinePrefix = "agent "

// servedAgent is one agent serving on its own loopback listener.
type servedAgent struct {
	agent  *agent.Agent
	server *http.Server
	url    string
}

// serveAgent opens an agent of rt for machine, its state under
// dir/hosts/machine, serving on a loopback listener of its own.
func serveAgent(ctx context.Context, dir, machine string, rt agent.Runtime) (*servedAgent, error) {
	a, err := agent.Open(ctx, agent.Options{Machine: machine, StateDir: filepath.Join(dir, "hosts", machine), Runtime: rt, Log: zerolog.Nop()})
	if err != nil {
		return nil, fmt.Errorf("bench agent %s: %w", machine, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = a.Close(ctx)
		return nil, fmt.Errorf("bench agent %s: listen: %w", machine, err)
	}
	hs := agent.NewServer(a, "")
	go func() { _ = hs.Serve(l) }()
	return &servedAgent{agent: a, server: hs, url: "http://" + l.Addr().String()}, nil
}

// close stops the agent's server and closes the agent.
func (s *servedAgent) close(ctx context.Context) error {
	return errors.Join(s.server.Shutdown(ctx), s.agent.Close(ctx))
}

// runAgentsProcess is an agents process's whole life: it serves the noop
// agents of the spec named by EnvAgents, printing each one's URL, until
// SIGTERM or stdin closes.
func runAgentsProcess() error {
	raw, err := os.ReadFile(os.Getenv(EnvAgents))
	if err != nil {
		return fmt.Errorf("bench agents: %w", err)
	}
	var spec agentsSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("bench agents: %w", err)
	}
	ctx := context.Background()
	served := make([]*servedAgent, 0, len(spec.Machines))
	defer func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for _, s := range served {
			_ = s.close(cctx)
		}
	}()
	for _, name := range spec.Machines {
		s, err := serveAgent(ctx, spec.Dir, name, agent.NewNoopRuntime(0))
		if err != nil {
			return err
		}
		served = append(served, s)
		fmt.Println(agentLinePrefix + name + " " + s.url)
	}
	fmt.Println(readyLine)
	untilStopped()
	return nil
}

// startAgentsProcesses serves names' noop agents from child processes,
// per each, and returns each machine's URL.
func (m *Mesh) startAgentsProcesses(ctx context.Context, names []string, per int) (map[string]string, error) {
	urls := map[string]string{}
	for i := 0; i*per < len(names); i++ {
		part := names[i*per : min((i+1)*per, len(names))]
		raw, err := json.Marshal(agentsSpec{Dir: m.dir, Machines: part})
		if err != nil {
			return nil, err
		}
		specPath := filepath.Join(m.dir, fmt.Sprintf("agents-%d.json", i))
		if err := os.WriteFile(specPath, raw, 0o644); err != nil {
			return nil, fmt.Errorf("bench agents: %w", err)
		}
		c, err := startChild(ctx, fmt.Sprintf("bench agents process %d", i), filepath.Join(m.dir, fmt.Sprintf("agents-%d.log", i)),
			[]string{EnvAgents + "=" + specPath}, func(line string) error {
				f := strings.Fields(strings.TrimPrefix(line, agentLinePrefix))
				if !strings.HasPrefix(line, agentLinePrefix) || len(f) != 2 {
					return fmt.Errorf("unexpected line %q", line)
				}
				urls[f[0]] = f[1]
				return nil
			})
		if err != nil {
			return nil, err
		}
		m.children = append(m.children, c)
	}
	return urls, nil
}
