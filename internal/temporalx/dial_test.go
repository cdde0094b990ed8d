package temporalx

import (
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
)

// The resolved temporal.grpc_compression reaches the SDK's connection
// options: none on loopback, the SDK's gzip (left unset) elsewhere.
func TestOptionsCompression(t *testing.T) {
	o, err := Options(config.Temporal{Address: "127.0.0.1:7233"}, zerolog.Nop())
	require.NoError(t, err)
	require.IsType(t, &client.GrpcCompressionNone{}, o.ConnectionOptions.GrpcCompression)
	o, err = Options(config.Temporal{Address: "10.0.0.5:7233"}, zerolog.Nop())
	require.NoError(t, err)
	require.Nil(t, o.ConnectionOptions.GrpcCompression, "the SDK's default, gzip")
}
