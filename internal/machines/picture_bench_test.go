package machines

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshroll/meshroll/internal/catalogue/sqlcat"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// BenchmarkReadStatusFromThePicture is the hosts' part of one status read
// (and one fleet-page read) at 10,000 machines: one read of the picture
// from SQLite and the rows made of it. The machine workflows are not asked
// (Temporal is down here): that part is a query per machine, as before.
func BenchmarkReadStatusFromThePicture(b *testing.B) {
	const n = 10000
	ctx := context.Background()
	cat, err := sqlcat.Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "catalogue.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer cat.Close()
	cfg := &config.Config{Machines: map[string]config.Machine{}}
	now := time.Now()
	names := make([]string, 0, n)
	for i := range n {
		name := fmt.Sprintf("m%05d", i)
		names = append(names, name)
		cfg.Machines[name] = config.Machine{Host: "http://127.0.0.1:1", Tier: 1 + i%3, Modules: []string{"host", "metrics"}}
		rep := mesh.Report{Machine: name, LastSeq: 3, Containers: []mesh.RunningContainer{
			healthy("host", 27, meshapi.PlanID("host", commitA), 3), healthy("metrics", 25, meshapi.PlanID("host", commitA), 3),
		}}
		if _, err := cat.RecordHostReport(ctx, name, rep, 7, now); err != nil {
			b.Fatal(err)
		}
	}
	if err := cat.HostsHeard(ctx, names, now); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		st, _ := ReadStatus(ctx, cfg, Sources{Dial: noTemporal, Hosts: cat.HostStates}, StatusFilter{})
		if len(st.Rows) != 2*n || st.Rows[0].HostError != "" {
			b.Fatalf("%d rows, first %+v", len(st.Rows), st.Rows[0])
		}
	}
}
