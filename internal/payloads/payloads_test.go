package payloads

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// handOver is a hand-over's input of n requests, as a plan of one build
// sends it.
func handOver(n int) meshapi.HandPushesInput {
	plan := meshapi.PlanID("app", strings.Repeat("5e", 20))
	b := mesh.Build{Module: "app", Commit: strings.Repeat("5e", 20), Digest: "sha256:" + strings.Repeat("e9", 32), Generation: 3}
	var in meshapi.HandPushesInput
	for i := range n {
		m := fmt.Sprintf("f1000r0-h%04d", i)
		in.Requests = append(in.Requests, meshapi.PushRequest{
			Request: meshapi.RequestID(plan, m), Plan: plan, Machine: m, Build: b, Policy: meshapi.DefaultPushPolicy,
			Declaration: mesh.Declaration{Machine: m, Plan: plan, Containers: []mesh.Container{{Module: b.Module, Digest: b.Digest, Generation: b.Generation, Commit: b.Commit}}},
		})
	}
	return in
}

func TestLargePayloadsAreCompressedAndReadBack(t *testing.T) {
	cases := []struct {
		name       string
		requests   int
		compressed bool
	}{
		{name: "a few machines' requests stay plain JSON", requests: 3},
		{name: "a hundred machines' requests are compressed", requests: 100, compressed: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := handOver(c.requests)
			plain, err := converter.GetDefaultDataConverter().ToPayload(in)
			require.NoError(t, err)
			p, err := Converter.ToPayload(in)
			require.NoError(t, err)
			if !c.compressed {
				require.Less(t, len(plain.GetData()), CompressAbove)
				require.Equal(t, plain.GetData(), p.GetData(), "what the Web UI shows as JSON")
				require.Equal(t, "json/plain", string(p.GetMetadata()[converter.MetadataEncoding]))
			} else {
				require.GreaterOrEqual(t, len(plain.GetData()), CompressAbove)
				require.Equal(t, "binary/zlib", string(p.GetMetadata()[converter.MetadataEncoding]))
				require.Less(t, len(p.GetData())*5, len(plain.GetData()), "a hand-over's requests repeat themselves: %d bytes compressed of %d", len(p.GetData()), len(plain.GetData()))
			}
			var back meshapi.HandPushesInput
			require.NoError(t, Converter.FromPayload(p, &back))
			require.Equal(t, in, back)
			// A payload written before compression, or by a plain
			// converter, reads as it is.
			var old meshapi.HandPushesInput
			require.NoError(t, Converter.FromPayload(plain, &old))
			require.Equal(t, in, old)
		})
	}
}

// BenchmarkHandOverRoundTrip is what the converter costs a hand-over of a
// hundred machines, encoded by the plan and decoded by the activity.
func BenchmarkHandOverRoundTrip(b *testing.B) {
	in := handOver(100)
	for _, c := range []struct {
		name string
		dc   converter.DataConverter
	}{{"plain", converter.GetDefaultDataConverter()}, {"compressed", Converter}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				p, err := c.dc.ToPayload(in)
				if err != nil {
					b.Fatal(err)
				}
				var back meshapi.HandPushesInput
				if err := c.dc.FromPayload(p, &back); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
