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
// hand-over's hundred requests share their build, a relay's bundle its
// plan), and they are most of a plan's history bytes, which Temporal
// caps at 50 MB: compressed, they cost a tenth. Below it sits everything
// a person reads in the Web UI (a plan's input, its details, a machine's
// request), which stays plain JSON there.
const CompressAbove = 16 << 10

// Converter is how every meshroll process encodes and decodes
// payloads: JSON, with those of CompressAbove bytes or more compressed.
// Every client, worker and reader of histories uses it, so that none
// meets a compressed payload it cannot read; it reads plain payloads,
// such as those written before it, as they are.
var Converter = converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), largePayloads{})

// largePayloads is the codec of Converter: zlib for payloads of
// CompressAbove bytes or more, where it saves space.
type largePayloads struct{}

var zlibCodec = converter.NewZlibCodec(converter.ZlibCodecOptions{})

// Encode compresses the large payloads and leaves the others as they are.
func (largePayloads) Encode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(ps))
	for i, p := range ps {
		out[i] = p
		if len(p.GetData()) < CompressAbove {
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
