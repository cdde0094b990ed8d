package enroll

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/backoff"
	"github.com/meshroll/meshroll/internal/secret"
)

// DefaultEvery is how often a pending agent asks again unless told
// otherwise: often enough that an admitted machine gets its modules soon
// after the operator's word, seldom enough that a fleet of pending
// machines is no load on the worker.
const DefaultEvery = 15 * time.Second

// MaxErrorWait caps the wait between asks that failed (worker down, token
// refused): an endpoint that comes back, or a fixed setting, is found within
// it, and a broken one is not hammered.
const MaxErrorWait = 5 * time.Minute

// askTimeout bounds one ask of a Client without an *http.Client: the
// endpoint answers at once (it records the ask, it does not wait for the
// operator), so a hung worker must surface as an error, not a silent agent.
const askTimeout = 30 * time.Second

// maxAnswerBytes bounds how much of an answer the client reads: an Answer is
// one line; anything longer is someone else's page.
const maxAnswerBytes = 64 << 10

// Client is the agent's end of enrollment: it asks the worker's endpoint to
// let its machine in.
type Client struct {
	// URL is the worker's enrollment base URL (such as
	// http://127.0.0.1:8236); the client asks at URL + Path.
	URL string
	// Token is the mesh's enrollment token, sent as a bearer token: it is
	// what tells the endpoint that the machine may ask at all. A
	// secret.String, it prints redacted wherever the Client is printed.
	Token secret.String
	// HTTP makes the requests; nil is a client with a 30s timeout that does
	// not follow redirects, since a redirected POST turns into a GET.
	HTTP *http.Client
}

// endpoint is where the client asks.
func (c Client) endpoint() string { return strings.TrimRight(c.URL, "/") + Path }

// shownURL is the endpoint for logs and errors: without any password the
// URL might carry.
func (c Client) shownURL() string {
	e := c.endpoint()
	if u, err := url.Parse(e); err == nil {
		return u.Redacted()
	}
	return e
}

// httpClient is c.HTTP or the default.
func (c Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{
		Timeout: askTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// statusState is the state each status that answers an ask carries; any
// other status is a refusal of the ask itself.
var statusState = map[int]string{
	http.StatusOK:        StateAdmitted,
	http.StatusAccepted:  StatePending,
	http.StatusForbidden: StateDenied,
}

// Ask asks once. It returns the endpoint's Answer for a pending (202),
// admitted (200) or denied (403) machine, and an error naming the URL and
// the status for any other answer (a bad token, a bad ask, a name that
// clashes, a worker that cannot reach Temporal, a proxy's error page), with
// the endpoint's Message or the start of the body. A request that never got
// an answer is an error wrapping the transport's. No error carries the
// token.
func (c Client) Ask(ctx context.Context, a Ask) (Answer, error) {
	shown := c.shownURL()
	body, err := json.Marshal(a)
	if err != nil {
		return Answer{}, fmt.Errorf("enroll at %s: encode ask: %w", shown, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint(), bytes.NewReader(body))
	if err != nil {
		return Answer{}, fmt.Errorf("enroll at %s: %w", shown, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token.Reveal())
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		// *url.Error repeats the URL; keep what went wrong.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return Answer{}, fmt.Errorf("enroll at %s: %w", shown, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
		_ = resp.Body.Close()
	}()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return Answer{}, fmt.Errorf("enroll at %s: %s: read answer: %w", shown, resp.Status, err)
	}
	var ans Answer
	isAnswer := json.Unmarshal(b, &ans) == nil
	if want, ok := statusState[resp.StatusCode]; ok && isAnswer && ans.State == want {
		return ans, nil
	}
	why := "not an enrollment answer: " + bodyExcerpt(b)
	if isAnswer && ans.Message != "" {
		why = oneLineOf(ans.Message)
	}
	return Answer{}, fmt.Errorf("enroll at %s: %s: %s", shown, resp.Status, c.redact(why))
}

// redact hides the token in what the endpoint said: whatever answered might
// echo what it was sent.
func (c Client) redact(s string) string {
	if c.Token == "" {
		return s
	}
	return strings.ReplaceAll(s, c.Token.Reveal(), "[token]")
}

// oneLineOf puts s on one line, for an error.
func oneLineOf(s string) string { return strings.Join(strings.Fields(s), " ") }

// bodyExcerpt is the start of a body that is not an Answer, on one line.
func bodyExcerpt(b []byte) string {
	s := oneLineOf(string(b))
	if s == "" {
		return "(empty body)"
	}
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return fmt.Sprintf("%q", s)
}

// Follow asks until the answer is final (admitted or denied) and returns
// it, or returns ctx.Err() once ctx ends. While the machine is pending it
// asks again every every (DefaultEvery if every is not positive); after an
// error it waits every, then twice as long each time up to MaxErrorWait.
// It logs each change of state or of error message, not each ask, so that
// an agent pending for days leaves one line, and the operator reading it
// learns what to do.
func (c Client) Follow(ctx context.Context, a Ask, every time.Duration, log zerolog.Logger) (Answer, error) {
	if every <= 0 {
		every = DefaultEvery
	}
	log = log.With().Str("machine", a.Machine).Str("url", c.shownURL()).Logger()
	var (
		last  string // what was logged last: a state or an error's text
		retry *backoff.Backoff
	)
	for {
		ans, err := c.Ask(ctx, a)
		if ctx.Err() != nil {
			return Answer{}, ctx.Err()
		}
		if err != nil {
			if seen := "error: " + err.Error(); seen != last {
				last = seen
				log.Error().Err(err).Msg("enrollment failed; asking again")
			}
			if retry == nil {
				retry = backoff.New(every, MaxErrorWait)
			}
			if err := retry.Wait(ctx); err != nil {
				return Answer{}, err
			}
			continue
		}
		retry = nil
		if seen := "state: " + ans.State; seen != last {
			last = seen
			ans.Message = c.redact(ans.Message)
			logAnswer(log, a.Machine, ans)
		}
		if ans.State != StatePending {
			return ans, nil
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return Answer{}, ctx.Err()
		case <-t.C:
		}
	}
}

// logAnswer logs a final or pending answer, in the endpoint's words when it
// gave any.
func logAnswer(log zerolog.Logger, machine string, ans Answer) {
	msg := oneLineOf(ans.Message)
	switch ans.State {
	case StatePending:
		if msg == "" {
			msg = "an operator admits this machine with `starter machine approve " + machine + "`"
		}
		log.Info().Str("state", ans.State).Msg("enrollment pending: " + msg)
	case StateAdmitted:
		if msg == "" {
			msg = "this machine is in the mesh; the worker brings it its modules"
		}
		log.Info().Str("state", ans.State).Msg("enrollment admitted: " + msg)
	case StateDenied:
		if msg == "" {
			msg = "an operator turned this machine away; nothing is pushed to it"
		}
		log.Warn().Str("state", ans.State).Msg("enrollment denied: " + msg)
	}
}
