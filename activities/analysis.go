package activities

import (
	"context"
	"errors"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// Analyse is a placeholder until the activity lands (issue 18).
func (a *Activities) Analyse(ctx context.Context, in meshapi.AnalyseInput) (meshapi.AnalyseResult, error) {
	return meshapi.AnalyseResult{}, errors.New("not yet")
}
