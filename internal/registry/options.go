// Package registry is how meshroll talks to the OCI registry its images live
// in, and the small registry it embeds for a development mesh.
//
// Options names any registry by address, with basic or token auth and TLS,
// and turns into go-containerregistry remote options, so that the builders
// and anything else that pulls or pushes share one notion of "the registry"
// and one place where credentials are handled (and never printed).
//
// Server is the embedded default: the CNCF distribution registry (the one
// Docker and most clouds run) as a library, storing in the worker's state
// directory, so that the development mesh is held to the same distribution
// spec as a production registry and keeps its images across restarts.
package registry

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/meshroll/meshroll/internal/secret"
	"github.com/meshroll/meshroll/internal/tlsca"
)

// Options says which registry to use and how to authenticate to it. It is
// plain data so that the mesh config can carry it; the secrets (Password,
// Token) are secret.Strings, redacted from every printed form, and no error
// of this package contains them.
type Options struct {
	// Address is the registry's host[:port], or a URL http://host[:port] or
	// https://host[:port]. An http URL implies Insecure. It must not carry a
	// path or credentials.
	Address string `mapstructure:"address" json:"address"`
	// Username and Password authenticate with HTTP basic auth, or, for a
	// registry that answers with a bearer challenge, are exchanged for a
	// token at the registry's token service (the usual docker token flow).
	Username string        `mapstructure:"username" json:"username,omitempty"`
	Password secret.String `mapstructure:"password" json:"password,omitempty"`
	// Token is a registry bearer token used as is (for registries that hand
	// out long-lived tokens). It excludes Username/Password.
	Token secret.String `mapstructure:"token" json:"token,omitempty"`
	// Insecure allows plain HTTP. Without it, plain HTTP is only tried for
	// loopback and private addresses (go-containerregistry's heuristic).
	Insecure bool `mapstructure:"insecure" json:"insecure,omitempty"`
	// CAFile is a PEM bundle trusted in addition to the system roots, for a
	// registry with a private CA or a self-signed certificate.
	CAFile string `mapstructure:"ca_file" json:"ca_file,omitempty"`
}

// Host is the registry's host[:port] as it appears in image names, or an
// error saying what is wrong with Address.
func (o Options) Host() (string, error) {
	host, _, err := o.parse()
	return host, err
}

// parse splits Address into the host and whether plain HTTP is allowed.
func (o Options) parse() (host string, insecure bool, err error) {
	addr := strings.TrimSpace(o.Address)
	if addr == "" {
		return "", false, errors.New("registry address is empty")
	}
	insecure = o.Insecure
	if strings.Contains(addr, "://") {
		u, perr := url.Parse(addr)
		if perr != nil {
			// url's error quotes the input, which may hold credentials.
			return "", false, errors.New("registry address is not a valid URL")
		}
		if u.User != nil {
			return "", false, fmt.Errorf("registry address %s carries credentials; set username/password or token instead", u.Redacted())
		}
		switch u.Scheme {
		case "http":
			insecure = true
		case "https":
		default:
			return "", false, fmt.Errorf("registry address %s: scheme must be http or https", u.Redacted())
		}
		if p := strings.Trim(u.Path, "/"); p != "" || u.RawQuery != "" || u.Fragment != "" {
			return "", false, fmt.Errorf("registry address %s must be scheme://host[:port] without a path; put the repository prefix in the builder", u.Redacted())
		}
		addr = u.Host
	}
	if strings.ContainsAny(addr, "/@ ") {
		return "", false, fmt.Errorf("registry address %q must be host[:port]", redactAt(addr))
	}
	if _, err := name.NewRegistry(addr); err != nil {
		return "", false, fmt.Errorf("registry address %q: %w", redactAt(addr), err)
	}
	return addr, insecure, nil
}

// redactAt drops anything before an '@', where a careless address keeps
// credentials.
func redactAt(s string) string {
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return secret.Redacted + s[i:]
	}
	return s
}

// Registry is the go-containerregistry name of the registry, insecure when
// plain HTTP is allowed.
func (o Options) Registry() (name.Registry, error) {
	host, insecure, err := o.parse()
	if err != nil {
		return name.Registry{}, err
	}
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	return name.NewRegistry(host, opts...)
}

// Repository names the repository path (for example "meshroll/host") in the
// registry.
func (o Options) Repository(path string) (name.Repository, error) {
	host, insecure, err := o.parse()
	if err != nil {
		return name.Repository{}, err
	}
	opts := []name.Option{name.StrictValidation}
	if insecure {
		opts = append(opts, name.Insecure)
	}
	r, err := name.NewRepository(host+"/"+strings.Trim(path, "/"), opts...)
	if err != nil {
		return name.Repository{}, fmt.Errorf("repository %q in registry %s: %w", path, host, err)
	}
	return r, nil
}

// Authenticator is the credential the options describe: a bearer token,
// basic auth, or anonymous.
func (o Options) Authenticator() (authn.Authenticator, error) {
	switch {
	case o.Token != "" && (o.Username != "" || o.Password != ""):
		return nil, errors.New("registry: set either a token or a username and password, not both")
	case o.Token != "":
		return &authn.Bearer{Token: o.Token.Reveal()}, nil
	case o.Username != "" || o.Password != "":
		if o.Username == "" || o.Password == "" {
			return nil, errors.New("registry: basic auth needs both a username and a password")
		}
		return &authn.Basic{Username: o.Username, Password: o.Password.Reveal()}, nil
	default:
		return authn.Anonymous, nil
	}
}

// Transport is remote.DefaultTransport with CAFile added to the trusted
// roots. It is a fresh transport, so that one registry's CA never leaks into
// another's connections.
func (o Options) Transport() (http.RoundTripper, error) { return o.transport() }

func (o Options) transport() (*http.Transport, error) {
	base, ok := remote.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, errors.New("registry: go-containerregistry's default transport is not an *http.Transport")
	}
	t := base.Clone()
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pool, err := tlsca.Pool(o.CAFile, true)
		if err != nil {
			return nil, fmt.Errorf("registry CA file: %w", err)
		}
		cfg.RootCAs = pool
	}
	t.TLSClientConfig = cfg
	return t, nil
}

// Remote is the go-containerregistry remote options for this registry: its
// credential and transport, and a user agent naming meshroll. Callers add
// remote.WithContext. Each call makes a new transport; use Session to close
// its idle connections when done.
func (o Options) Remote() ([]remote.Option, error) {
	opts, _, err := o.remote()
	return opts, err
}

// Session is Remote for a bounded piece of work (one build): done closes
// the transport's idle connections, so that a long-running worker does not
// keep a connection per finished build.
func (o Options) Session() (opts []remote.Option, done func(), err error) {
	opts, t, err := o.remote()
	if err != nil {
		return nil, nil, err
	}
	return opts, t.CloseIdleConnections, nil
}

func (o Options) remote() ([]remote.Option, *http.Transport, error) {
	if _, _, err := o.parse(); err != nil {
		return nil, nil, err
	}
	auth, err := o.Authenticator()
	if err != nil {
		return nil, nil, err
	}
	t, err := o.transport()
	if err != nil {
		return nil, nil, err
	}
	return []remote.Option{remote.WithAuth(auth), remote.WithTransport(t), remote.WithUserAgent("meshroll")}, t, nil
}
