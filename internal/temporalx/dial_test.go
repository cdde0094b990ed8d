package temporalx

import (
	"context"
	"testing"
	"time"

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

// An unreachable Temporal on this machine points at the dev stack, one
// elsewhere at the configured address; neither at a bare dev server the
// mesh's search attributes are not registered on.
func TestUnreachableHint(t *testing.T) {
	for _, tc := range []struct{ address, want string }{
		{"127.0.0.1:7233", "start the dev stack (go run ./worker --dev"},
		{"localhost:7233", "start the dev stack (go run ./worker --dev"},
		{"[::1]:7233", "start the dev stack (go run ./worker --dev"},
		{"temporal.internal:7233", "check that the Temporal frontend at temporal.internal:7233 is up and reachable from here"},
		{"10.0.0.5:7233", "check that the Temporal frontend at 10.0.0.5:7233 is up"},
	} {
		got := unreachableHint(config.Temporal{Address: tc.address})
		require.Contains(t, got, tc.want, tc.address)
		require.Contains(t, got, "MESHROLL_TEMPORAL_ADDRESS", tc.address)
		require.NotContains(t, got, "start-dev", tc.address)
	}

	_, err := Dial(context.Background(), config.Temporal{Address: "127.0.0.1:1", Namespace: "default"}, zerolog.Nop(), time.Second)
	require.Error(t, err)
	require.Contains(t, err.Error(), "temporal unreachable at 127.0.0.1:1 (namespace default): ")
	require.Contains(t, err.Error(), "; start the dev stack (go run ./worker --dev")
}
