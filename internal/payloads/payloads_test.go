package payloads

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
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

// composeBatch is a compose batch's input of n targets, as a plan sends it.
func composeBatch(n int) meshapi.ComposeTargetsInput {
	in := meshapi.ComposeTargetsInput{Plan: meshapi.PlanID("app", strings.Repeat("5e", 20)), Build: handOver(1).Requests[0].Build}
	for i := range n {
		in.Targets = append(in.Targets, meshapi.Target{Machine: fmt.Sprintf("f10000r0-h%04d", i), Tier: 1, Modules: []string{"app"}})
	}
	return in
}

func TestLargePayloadsAreCompressedAndReadBack(t *testing.T) {
	cases := []struct {
		name       string
		value      any
		compressed bool
	}{
		{name: "a few machines' requests stay plain JSON", value: handOver(3)},
		{name: "one machine's answer stays plain JSON", value: meshapi.PushResult{Request: "plan/app/5e@f1000r0-h0001", Plan: "plan/app/5e", Machine: "f1000r0-h0001", Outcome: meshapi.MachineConverged, Seq: 4}},
		{name: "a hundred machines' requests are compressed", value: handOver(100), compressed: true},
		// Under 16 KiB: at 10,000 machines these were most of a plan's
		// history bytes while the threshold was 16 KiB.
		{name: "a compose batch of a hundred targets is compressed", value: composeBatch(100), compressed: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plain, err := converter.GetDefaultDataConverter().ToPayload(c.value)
			require.NoError(t, err)
			p, err := Converter.ToPayload(c.value)
			require.NoError(t, err)
			if !c.compressed {
				require.Less(t, len(plain.GetData()), CompressAbove)
				require.Equal(t, plain.GetData(), p.GetData(), "what the Web UI shows as JSON")
				require.Equal(t, "json/plain", string(p.GetMetadata()[converter.MetadataEncoding]))
			} else {
				require.GreaterOrEqual(t, len(plain.GetData()), CompressAbove)
				require.Equal(t, "binary/zlib", string(p.GetMetadata()[converter.MetadataEncoding]))
				require.Less(t, len(p.GetData())*5, len(plain.GetData()), "bulk payloads repeat themselves: %d bytes compressed of %d", len(p.GetData()), len(plain.GetData()))
			}
			back := reflect.New(reflect.TypeOf(c.value))
			require.NoError(t, Converter.FromPayload(p, back.Interface()))
			require.Equal(t, c.value, back.Elem().Interface())
			// A payload written before compression, or by a plain
			// converter, reads as it is.
			old := reflect.New(reflect.TypeOf(c.value))
			require.NoError(t, Converter.FromPayload(plain, old.Interface()))
			require.Equal(t, c.value, old.Elem().Interface())
		})
	}
}

// A workflow's metadata, which carries the current details the Web UI
// shows (a plan's tiers and latest measurements), stays as the SDK wrote
// it at any size: a person reads it without the codec endpoint.
func TestWorkflowMetadataStaysPlain(t *testing.T) {
	md := &sdkpb.WorkflowMetadata{CurrentDetails: strings.Repeat("- tier 1: pushing\n", CompressAbove/10)}
	p, err := Converter.ToPayload(md)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(p.GetData()), CompressAbove)
	require.Equal(t, converter.MetadataEncodingProtoJSON, string(p.GetMetadata()[converter.MetadataEncoding]))
	var back sdkpb.WorkflowMetadata
	require.NoError(t, Converter.FromPayload(p, &back))
	require.Equal(t, md.GetCurrentDetails(), back.GetCurrentDetails())
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
