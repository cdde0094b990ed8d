package workerapp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshroll/meshroll/internal/backoff"
)

// EnsureNamespace registers namespace on the server when it is missing, with
// retention of closed workflows, and waits until the server serves it. It
// is for namespaces meshroll owns, such as the demo's, which keep their
// runs out of the operator's own list; production namespaces are the
// operator's to create.
func EnsureNamespace(ctx context.Context, c client.Client, namespace string, retention time.Duration, log zerolog.Logger) error {
	svc := c.WorkflowService()
	_, err := svc.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	var nf *serviceerror.NamespaceNotFound
	switch {
	case err == nil:
	case errors.As(err, &nf):
		_, err := svc.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace:                        namespace,
			Description:                      "created by meshroll",
			WorkflowExecutionRetentionPeriod: durationpb.New(retention),
		})
		var exists *serviceerror.NamespaceAlreadyExists
		if err != nil && !errors.As(err, &exists) {
			return fmt.Errorf("register namespace %s: %w (create it yourself: temporal operator namespace create --namespace %s)", namespace, err, namespace)
		}
		log.Info().Str("namespace", namespace).Msg("namespace registered")
	default:
		return fmt.Errorf("describe namespace %s: %w", namespace, err)
	}
	// A namespace just registered reaches the frontend's cache a few
	// seconds later; until then calls in it are refused as not found.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b := backoff.New(100*time.Millisecond, time.Second)
	for {
		_, err := svc.CountWorkflowExecutions(wctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace})
		if err == nil {
			return nil
		}
		if !errors.As(err, &nf) {
			return fmt.Errorf("namespace %s: %w", namespace, err)
		}
		if werr := b.Wait(wctx); werr != nil {
			return fmt.Errorf("namespace %s not served yet: %w", namespace, err)
		}
	}
}
