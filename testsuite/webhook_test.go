package testsuite

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/webhook"
	"github.com/meshroll/meshroll/internal/workerapp"
)

// hookSecret is the merge receiver's secret in these tests.
const hookSecret = "hook-s3cret"

// A signed GitHub push of a commit touching examples/host, to the bare
// repository the worker's clone fetches from, starts exactly the host
// plan, which converges; the same delivery again starts nothing more, and
// another delivery of the same push finds the plan already started.
func TestWebhookPushStartsTheTouchedPlan(t *testing.T) {
	t.Parallel()
	s := newStack(t, exampleMesh())
	origin := s.bareOrigin()
	before, after := s.pushToOrigin(origin, "host")
	base := s.serveWebhooks()

	body := fmt.Sprintf(`{"ref":"refs/heads/main","before":%q,"after":%q,"repository":{"full_name":"acme/mesh","clone_url":%q}}`,
		before, after, "file://"+origin)
	status, line := postPush(t, base, "d-1", body)
	require.Equal(t, http.StatusAccepted, status, line)
	require.Contains(t, line, "accepted: push of "+after[:12]+" to main of acme/mesh (modules host, mesh-controller); workflow receive/github/d-1")
	status, line = postPush(t, base, "d-1", body)
	require.Equal(t, http.StatusOK, status, line)
	require.True(t, strings.HasPrefix(line, "already received: "), line)

	res := s.received("d-1")
	require.Equal(t, []meshapi.ReceivedPlan{{Module: "host", Plan: meshapi.PlanID("host", after)}}, res.Plans)
	require.Equal(t, []string{"mesh-controller"}, res.Untouched, "the push did not touch examples/mesh-controller")
	st := s.wait(meshapi.PlanID("host", after))
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	s.everywhere(s.build("host", after))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := s.c.DescribeWorkflow(ctx, meshapi.PlanID("mesh-controller", after), "")
	require.ErrorAs(t, err, new(*serviceerror.NotFound), "no plan of the untouched module")

	// The git host delivering the push again under a new ID finds the
	// plan the first delivery started, as a manual merge would.
	status, line = postPush(t, base, "d-2", body)
	require.Equal(t, http.StatusAccepted, status, line)
	require.Equal(t, []meshapi.ReceivedPlan{{Module: "host", Plan: meshapi.PlanID("host", after), Existing: true}}, s.received("d-2").Plans)

	// Without the head before the push (a new branch), nothing can be
	// compared: every module of the repository counts as touched.
	whole := fmt.Sprintf(`{"ref":"refs/heads/main","after":%q,"repository":{"full_name":"acme/mesh","clone_url":%q}}`, after, "file://"+origin)
	status, line = postPush(t, base, "d-3", whole)
	require.Equal(t, http.StatusAccepted, status, line)
	res = s.received("d-3")
	require.True(t, res.Everything)
	require.Equal(t, []meshapi.ReceivedPlan{
		{Module: "host", Plan: meshapi.PlanID("host", after), Existing: true},
		{Module: "mesh-controller", Plan: meshapi.PlanID("mesh-controller", after)},
	}, res.Plans)
	require.Equal(t, meshapi.PlanConverged, s.wait(meshapi.PlanID("mesh-controller", after)).State)
}

// bareOrigin makes a bare repository of the stack's repository and makes
// it the clone's origin: where the git host's pushes land.
func (s *stack) bareOrigin() string {
	s.t.Helper()
	origin := filepath.Join(s.t.TempDir(), "mesh.git")
	gitIn(s.t, "", "clone", "-q", "--bare", s.repo, origin)
	s.git("remote", "add", "origin", origin)
	s.git("fetch", "-q", "origin")
	return origin
}

// pushToOrigin commits a change to module in a clone of origin and pushes
// it, as a merge on the git host does; the worker's clone has not seen it.
// It returns the branch's heads before and after.
func (s *stack) pushToOrigin(origin, module string) (before, after string) {
	s.t.Helper()
	work := s.t.TempDir()
	gitIn(s.t, "", "clone", "-q", origin, work)
	before = gitIn(s.t, work, "rev-parse", "HEAD")
	f := filepath.Join(work, "examples", module, "version.txt")
	old, err := os.ReadFile(f)
	require.NoError(s.t, err)
	require.NoError(s.t, os.WriteFile(f, append(old, 'y'), 0o644))
	gitIn(s.t, work, "commit", "-q", "-am", "change "+module+" on the git host")
	gitIn(s.t, work, "push", "-q", "origin", "main")
	return before, gitIn(s.t, work, "rev-parse", "HEAD")
}

// serveWebhooks serves the merge receiver as the worker does, on a free
// port, and returns its base URL.
func (s *stack) serveWebhooks() string {
	s.t.Helper()
	cfg := *s.cfg
	cfg.Worker.WebhookListen, cfg.Worker.WebhookSecret = "127.0.0.1:0", hookSecret
	addr, stop, err := workerapp.ServeWebhooks(context.Background(), s.c, &cfg, s.repo, zerolog.Nop())
	require.NoError(s.t, err)
	s.t.Cleanup(func() { _ = stop(context.Background()) })
	return "http://" + addr.String()
}

// received waits for a delivery's Receive workflow and returns its result.
func (s *stack) received(delivery string) meshapi.ReceiveResult {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var res meshapi.ReceiveResult
	require.NoError(s.t, s.c.GetWorkflow(ctx, meshapi.ReceiveID(webhook.GitHub, delivery), "").Get(ctx, &res))
	return res
}

// postPush posts a GitHub push event signed with hookSecret and returns
// the status and the one line of the answer.
func postPush(t *testing.T, base, delivery, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+webhook.PathPrefix+webhook.GitHub, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+webhook.Sign([]byte(hookSecret), []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, strings.TrimSuffix(string(b), "\n")
}

// gitIn runs git in dir ("" for none) as the stack's author: the
// stack's repository (stack.git), or another clone.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	if dir != "" {
		args = append([]string{"-C", dir}, args...)
	}
	cmd := exec.Command("git", args...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=meshroll", "GIT_AUTHOR_EMAIL=t@example.invalid",
		"GIT_COMMITTER_NAME=meshroll", "GIT_COMMITTER_EMAIL=t@example.invalid")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// A clone that cannot be fetched when the push arrives is fetched again
// by the delivery's workflow, not lost with the request: the origin away,
// the receiver still answers 202, the fetch fails and is retried, and once
// the origin is back the plan starts and converges.
func TestWebhookFetchIsRetriedUntilTheOriginAnswers(t *testing.T) {
	t.Parallel()
	s := newStack(t, exampleMesh())
	origin := s.bareOrigin()
	before, after := s.pushToOrigin(origin, "host")
	base := s.serveWebhooks()
	require.NoError(t, os.Rename(origin, origin+".away"))

	body := fmt.Sprintf(`{"ref":"refs/heads/main","before":%q,"after":%q,"repository":{"clone_url":%q}}`, before, after, origin)
	status, line := postPush(t, base, "d-away", body)
	require.Equal(t, http.StatusAccepted, status, line)
	id := meshapi.ReceiveID(webhook.GitHub, "d-away")
	var failure string
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, err := s.c.DescribeWorkflow(ctx, id, "")
		if err != nil || len(d.RawResponse.GetPendingActivities()) == 0 {
			return false
		}
		a := d.RawResponse.GetPendingActivities()[0]
		failure = a.GetLastFailure().GetMessage()
		return a.Attempt >= 2 && failure != ""
	}, time.Minute, 100*time.Millisecond, "the fetch fails and is retried")
	require.Contains(t, failure, "fetch the clone")

	require.NoError(t, os.Rename(origin+".away", origin))
	res := s.received("d-away")
	require.Equal(t, []meshapi.ReceivedPlan{{Module: "host", Plan: meshapi.PlanID("host", after)}}, res.Plans)
	st := s.wait(meshapi.PlanID("host", after))
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
}

// TestCaptureReceiveHistory records a delivery's Receive workflow, a
// workflow type the other captures do not run, for the replay tests. Like
// them it runs only with MESHROLL_WRITE_HISTORIES=1.
func TestCaptureReceiveHistory(t *testing.T) {
	t.Parallel()
	capturing(t)
	s := captureStack(t, exampleMesh())
	origin := s.bareOrigin()
	before, after := s.pushToOrigin(origin, "host")
	// The history keeps the event's full_name, never the origin's path.
	body := fmt.Sprintf(`{"ref":"refs/heads/main","before":%q,"after":%q,"repository":{"full_name":"acme/mesh","clone_url":%q}}`,
		before, after, origin)
	status, line := postPush(t, s.serveWebhooks(), "capture", body)
	require.Equal(t, http.StatusAccepted, status, line)
	require.Len(t, s.received("capture").Plans, 1)
	require.Equal(t, meshapi.PlanConverged, s.wait(meshapi.PlanID("host", after)).State)

	s.writeHistories(capturedRun{"receive-push", meshapi.ReceiveID(webhook.GitHub, "capture"), ""})
}

// The README's curl line, run as written (its address and secret file
// moved to the test stack's) from the root of a dev stack's repository,
// delivers a signed push the receiver accepts, and the host plan at the
// head converges.
func TestReadmeWebhookLineStartsPlans(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the worker binary; skipped with -short")
	}
	cli := dsTemporalCLI(t)
	bins := dsBuild(t, "worker", "starter")
	m := dsScratchMesh(t)
	st := dsStartStack(t, bins, m, t.TempDir(), cli)
	defer st.interrupt(t)

	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	var script string
	for _, block := range strings.Split(string(readme), "```")[1:] {
		if strings.Contains(block, "openssl dgst") {
			script = strings.TrimPrefix(block, "sh\n")
			break
		}
	}
	require.NotEmpty(t, script, "the README shows a curl line signing a push")
	script = strings.NewReplacer("127.0.0.1:8235", m.hook, ".meshroll/webhook-secret", m.hookSecret).Replace(script)
	cmd := exec.Command("sh", "-ec", script)
	cmd.Dir = m.repo
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	head := m.git(t, "rev-parse", "HEAD")
	require.Contains(t, string(out), "accepted: push of "+head[:12]+" to main of "+m.repo, "%s", out)
	dsWaitPlan(t, bins, m, meshapi.PlanID("host", head), meshapi.PlanConverged)
}
