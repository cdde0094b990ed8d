// Package payloads is how every meshroll process encodes what it hands
// Temporal: JSON, with the large payloads compressed (see Converter).
package payloads

import (
	"net/http"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// CompressAbove is the size from which a payload is stored zlib-compressed.
// A plan's bulk payloads grow with its fleet and repeat themselves (a
// hand-over's hundred requests share their build, a compose batch's
// hundred targets their tier and modules, a relay's bundle its plan), and
// they are most of a plan's history bytes, which Temporal caps at 50 MB:
// compressed, they cost a tenth. A compose batch's input is 5 to 6 KiB,
// so a threshold of 16 KiB left it plain, and at 10,000 machines it was
// more than half of the plan's payload bytes (58 of 96 bytes a machine;
// 42 with it compressed). Below 4 KiB sits everything a person reads in
// the Web UI (a plan's input, its details, a machine's request and
// answer, and all of a plan of a few dozen machines), which stays plain
// JSON there; the rest reads as JSON through the codec endpoint
// (CodecHandler).
const CompressAbove = 4 << 10

// Converter is how every meshroll process encodes and decodes
// payloads: JSON, with those of CompressAbove bytes or more compressed.
// Every client, worker and reader of histories uses it, so that none
// meets a compressed payload it cannot read; it reads plain payloads,
// such as those written before it, as they are.
var Converter = converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), largePayloads{})

// largePayloads is the codec of Converter: zlib for payloads of
// CompressAbove bytes or more, where it saves space. The SDK's own
// messages (json/protobuf) stay as they are, whatever their size: among
// them is a workflow's metadata, whose current details (a plan's tiers and
// latest measurements) the Web UI shows, and which a person must be able
// to read there even without the codec endpoint.
type largePayloads struct{}

var zlibCodec = converter.NewZlibCodec(converter.ZlibCodecOptions{})

// Encode compresses the large payloads and leaves the others as they are.
func (largePayloads) Encode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(ps))
	for i, p := range ps {
		out[i] = p
		if len(p.GetData()) < CompressAbove || string(p.GetMetadata()[converter.MetadataEncoding]) == converter.MetadataEncodingProtoJSON {
			continue
		}
		enc, err := zlibCodec.Encode([]*commonpb.Payload{p})
		if err != nil {
			return ps, err
		}
		out[i] = enc[0]
	}
	return out, nil
}

// Decode decompresses what Encode compressed; the zlib codec leaves any
// other payload as it is.
func (largePayloads) Decode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return zlibCodec.Decode(ps)
}

// CodecHandler is the codec as the Temporal Web UI and the CLI's
// --codec-endpoint speak it (POST …/decode and …/encode, payloads as
// protobuf JSON), so that a person reads a large payload there as the
// JSON meshroll wrote, not as binary/zlib. It decodes what Converter
// compressed and passes every other payload through as it is.
func CodecHandler() http.Handler {
	return converter.NewPayloadCodecHTTPHandler(largePayloads{})
}
