package build

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/meshroll/meshroll/internal/registry"
)

// push puts img into repo, tagged with the commit for people browsing the
// registry (agents pull by digest only). An image whose digest the registry
// already holds is not pushed again: that is what makes a retried build
// cheap. It returns the manifest digest.
func push(opts []remote.Option, repo name.Repository, commit string, img v1.Image, run *run) (string, error) {
	d, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("image digest: %w", err)
	}
	digest := d.String()
	host := repo.RegistryStr()
	if _, err := remote.Head(repo.Digest(digest), opts...); err == nil {
		run.logf("%s@%s is already in the registry; not pushing", repo.Name(), digest)
		return digest, nil
	} else if !isClientError(err) {
		return "", registryError(host, "look up "+repo.Name()+"@"+digest, err)
	}
	run.logf("pushing %s:%s (%s)", repo.Name(), commit, digest)
	if err := remote.Write(repo.Tag(commit), img, opts...); err != nil {
		return "", registryError(host, "push "+repo.Name(), err)
	}
	return digest, nil
}

// checkRegistry asks the registry about the commit's tag before anything is
// built, so that an unreachable registry fails the attempt in a second
// rather than after a compile. Any answer, "not found" included, will do.
func checkRegistry(opts []remote.Option, repo name.Repository, commit string) error {
	if _, err := remote.Head(repo.Tag(commit), opts...); err != nil && !isClientError(err) {
		return registryError(repo.RegistryStr(), "reach "+repo.Name(), err)
	}
	return nil
}

// session is the remote options of one build, bound to its context, and
// the function releasing their connections.
func session(ctx context.Context, reg registry.Options) ([]remote.Option, func(), error) {
	opts, done, err := reg.Session()
	if err != nil {
		return nil, nil, &PermanentError{err}
	}
	return append(opts, remote.WithContext(ctx)), done, nil
}

// isClientError reports a 4xx answer: for a lookup, "not there" (some
// registries answer 401 rather than 404 for what an anonymous caller cannot
// see), after which pushing is the way to find out more.
func isClientError(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode >= 400 && te.StatusCode < 500
}

// registryError names the registry tried and classifies the failure: an
// unreachable or failing registry (network errors, 5xx, 408, 429) is worth
// retrying; a registry that refuses the request (bad credentials, a
// forbidden repository, an invalid manifest) will refuse the retry too.
// go-containerregistry's errors carry URLs and the registry's messages, never
// the credentials, which travel only in headers.
func registryError(host, what string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", what, err)
	}
	var te *transport.Error
	if errors.As(err, &te) {
		switch {
		case te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden:
			return &PermanentError{fmt.Errorf("%s: registry %s refused the credentials (%d); check the registry's username/password or token: %w", what, host, te.StatusCode, err)}
		case te.StatusCode >= 400 && te.StatusCode < 500 && te.StatusCode != http.StatusRequestTimeout && te.StatusCode != http.StatusTooManyRequests:
			return &PermanentError{fmt.Errorf("%s: registry %s refused it: %w", what, host, err)}
		default:
			return fmt.Errorf("%s: registry %s failed: %w", what, host, err)
		}
	}
	return fmt.Errorf("%s: registry %s unreachable: %w", what, host, err)
}
