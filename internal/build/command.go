package build

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/meshroll/meshroll/internal/mesh"
)

// ExitTempFail is the exit status (sysexits' EX_TEMPFAIL) by which a build
// command says "failed, but retry me", for example when its push hit a
// flaky network. Any other non-zero status fails the build for good.
const ExitTempFail = 75

// Command is the builder for modules with their own recipe (docker buildx,
// ko, nix, a script): it runs Request.Command in the module's directory of
// a clean checkout at the commit. The command builds and pushes the image
// itself, authenticating on its own, and writes the pushed image's digest to
// the file MESHROLL_DIGEST_FILE names; the builder reads it from there. The
// command's environment is the worker's without its MESHROLL_* and TEMPORAL_*
// variables (the worker's secrets travel in those, and the command runs the
// repository's code), then Env, then:
//
//	MESHROLL_MODULE       the module
//	MESHROLL_COMMIT       the full commit id
//	MESHROLL_GENERATION   the commit's generation
//	MESHROLL_IMAGE        the repository to push to, <registry>/<prefix>/<module>
//	                      (empty without a Registry)
//	MESHROLL_REGISTRY     the registry's host[:port] (empty without a Registry)
//	MESHROLL_CHECKOUT     the checkout's root directory
//	MESHROLL_DIGEST_FILE  the file to write the digest to
//
// The file holds a digest (sha256:...), an image reference with one
// (repo@sha256:..., as ko --image-refs writes it), or buildx's
// --metadata-file JSON. A reference's repository becomes the build's Image;
// otherwise it is MESHROLL_IMAGE. When that image lives in Registry, the
// builder checks the registry really holds the digest, so a command that
// forgot to push fails here rather than on every host. Reproducibility is
// the command's business: the same commit gives the same digest only if the
// command makes it so.
type Command struct {
	Options
}

// Build implements Builder.
func (c *Command) Build(ctx context.Context, r Request) (mesh.Build, error) {
	return buildNamed(ctx, r, c.build)
}

func (c *Command) build(ctx context.Context, r Request) (mesh.Build, error) {
	if len(r.Command) == 0 || r.Command[0] == "" {
		return mesh.Build{}, &PermanentError{errors.New("the module's build command is empty")}
	}
	var target, host string
	if c.Registry.Address != "" {
		repo, err := c.repository(r.Module)
		if err != nil {
			return mesh.Build{}, err
		}
		target, host = repo.Name(), repo.RegistryStr()
	}

	j, err := startJob(ctx, r, c.ProgressInterval)
	if err != nil {
		return mesh.Build{}, err
	}
	defer j.end()
	if err := j.checkout(ctx); err != nil {
		return mesh.Build{}, err
	}
	digestFile, err := c.digestFile(j.dir, j.modDir, r)
	if err != nil {
		return mesh.Build{}, err
	}

	j.logf("running %s (in %s)", strings.Join(r.Command, " "), displayPath(r.Path))
	cmd := j.command(ctx, r.Command, c.Env,
		"MESHROLL_MODULE="+r.Module,
		"MESHROLL_COMMIT="+r.Commit,
		"MESHROLL_GENERATION="+strconv.FormatInt(j.gen, 10),
		"MESHROLL_IMAGE="+target,
		"MESHROLL_REGISTRY="+host,
		"MESHROLL_CHECKOUT="+j.dir,
		"MESHROLL_DIGEST_FILE="+digestFile,
	)
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Exited() && ee.ExitCode() == ExitTempFail && ctx.Err() == nil {
			return mesh.Build{}, failure("build command asked to be retried", err, j.tail)
		}
		if errors.As(err, &ee) && ee.Exited() && ctx.Err() == nil {
			return mesh.Build{}, &PermanentError{failure("build command failed", err, j.tail)}
		}
		return mesh.Build{}, commandFailure(ctx, "build command", err, j.tail)
	}

	data, err := os.ReadFile(digestFile)
	if err != nil {
		return mesh.Build{}, &PermanentError{failure("build command succeeded but wrote no digest to $MESHROLL_DIGEST_FILE", err, j.tail)}
	}
	image, digest, err := parseDigestFile(data)
	if err != nil {
		return mesh.Build{}, &PermanentError{fmt.Errorf("digest file: %w", err)}
	}
	if image == "" {
		image = target
	}
	if image == "" {
		return mesh.Build{}, &PermanentError{errors.New("the build command wrote a bare digest and no registry is configured; write repo@digest or configure the registry")}
	}
	if err := c.verify(ctx, image, digest, host); err != nil {
		return mesh.Build{}, err
	}
	return j.built(image, digest), nil
}

// digestFile is where the command must write the digest. A stale file (one
// committed, say) is removed first so it cannot pass for this build's.
func (c *Command) digestFile(checkout, modDir string, r Request) (string, error) {
	if r.DigestFile == "" {
		// Beside the checkout, so the checkout's cleanup removes it.
		return filepath.Join(filepath.Dir(checkout), "digest"), nil
	}
	rel, err := relPath("digest file", r.DigestFile)
	if err != nil {
		return "", err
	}
	p := filepath.Join(modDir, rel)
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("digest file: %w", err)
	}
	return p, nil
}

// verify checks that the registry holds image@digest, when image lives in
// the configured registry: the builder's credentials are for that registry
// only and are never sent elsewhere.
func (c *Command) verify(ctx context.Context, image, digest, host string) error {
	nopts := []name.Option{name.WeakValidation}
	if reg, err := c.Registry.Registry(); err == nil && reg.Scheme() == "http" {
		nopts = append(nopts, name.Insecure)
	}
	ref, err := name.NewDigest(image+"@"+digest, nopts...)
	if err != nil {
		return &PermanentError{fmt.Errorf("image %s@%s: %w", image, digest, err)}
	}
	if host == "" || ref.RegistryStr() != host {
		return nil
	}
	opts, done, err := session(ctx, c.Registry)
	if err != nil {
		return err
	}
	defer done()
	if _, err := remote.Head(ref, opts...); err != nil {
		if isClientError(err) {
			return &PermanentError{fmt.Errorf("the build command reported %s but registry %s does not hold it: %w", ref, host, err)}
		}
		return registryError(host, "look up "+ref.String(), err)
	}
	return nil
}

// parseDigestFile reads what a build command reported: a digest, an image
// reference with a digest, or buildx's metadata JSON. image is the
// reference's repository, "" for a bare digest.
func parseDigestFile(data []byte) (image, digest string, err error) {
	s := strings.TrimSpace(string(data))
	if strings.HasPrefix(s, "{") {
		var md map[string]any
		if err := json.Unmarshal(data, &md); err != nil {
			return "", "", fmt.Errorf("JSON metadata: %w", err)
		}
		d, _ := md["containerimage.digest"].(string)
		if d == "" {
			return "", "", errors.New("JSON metadata has no containerimage.digest")
		}
		if err := mesh.ValidDigest(d); err != nil {
			return "", "", err
		}
		if n, _ := md["image.name"].(string); n != "" {
			first, _, _ := strings.Cut(n, ",")
			if repo, err := repository(first); err == nil {
				image = repo
			}
		}
		return image, d, nil
	}
	line, _, _ := strings.Cut(s, "\n")
	line = strings.TrimSpace(line)
	if line == "" {
		return "", "", errors.New("empty; the command must write the pushed image's digest")
	}
	if ref, d, ok := strings.Cut(line, "@"); ok {
		if err := mesh.ValidDigest(d); err != nil {
			return "", "", err
		}
		repo, err := repository(ref)
		if err != nil {
			return "", "", err
		}
		return repo, d, nil
	}
	if err := mesh.ValidDigest(line); err != nil {
		return "", "", err
	}
	return "", line, nil
}

// repository strips a tag from an image reference.
func repository(ref string) (string, error) {
	r, err := name.ParseReference(strings.TrimSpace(ref), name.WeakValidation)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", ref, err)
	}
	return r.Context().Name(), nil
}
