package workerapp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rs/zerolog"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/backoff"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// EnsureSearchAttributes registers meshroll's search attributes on the
// namespace when they are missing, so that plans can be started with them
// and found by them in the Web UI. A plan started against a namespace without
// them would be refused by the server, so the worker does this before it
// polls. Where the operator service refuses (Temporal Cloud registers
// attributes through its own API), the error says what to register.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string, log zerolog.Logger) error {
	var have *operatorservice.ListSearchAttributesResponse
	// A server that is just starting answers Unavailable for a moment;
	// wait for it rather than refuse to start.
	b := backoff.New(100*time.Millisecond, 0)
	for {
		var err error
		have, err = c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
		var unavailable *serviceerror.Unavailable
		if err == nil {
			break
		}
		if !errors.As(err, &unavailable) || b.Next() > 10*time.Second {
			return fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
		}
		if err := b.Wait(ctx); err != nil {
			return err
		}
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range meshapi.SearchAttributeTypes {
		if _, ok := have.GetCustomAttributes()[name]; ok {
			continue
		}
		v, err := enumspb.IndexedValueTypeFromString(typ)
		if err != nil {
			return fmt.Errorf("search attribute %s: %w", name, err)
		}
		missing[name] = v
	}
	if len(missing) == 0 {
		return nil
	}
	names := make([]string, 0, len(missing))
	for n := range missing {
		names = append(names, n)
	}
	slices.Sort(names)
	if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing,
	}); err != nil {
		return fmt.Errorf("register search attributes %v on namespace %s: %w (register them yourself, e.g. temporal operator search-attribute create --name MeshrollModule --type Keyword)",
			names, namespace, err)
	}
	log.Info().Strs("search_attributes", names).Str("namespace", namespace).Msg("search attributes registered")
	return nil
}
