package testsuite

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/devserver"
	"github.com/meshroll/meshroll/internal/fleetui"
	"github.com/meshroll/meshroll/internal/payloads"
	"github.com/meshroll/meshroll/internal/workerapp"
)

// bulkInput is a payload large enough to be stored compressed, as a large
// plan's hand-overs are; Note comes first, where a person (and the Web UI's
// first lines) reads it.
type bulkInput struct {
	Note     string   `json:"note"`
	Machines []string `json:"machines"`
}

// A compressed payload reads as the JSON meshroll wrote, in the Web UI and
// in `temporal workflow show`, through the codec endpoint the worker's
// fleet-page server serves (as `worker --dev` wires it: the dev server's
// --ui-codec-endpoint); without the endpoint it reads as binary/zlib.
func TestWebUIDecodesCompressedPayloads(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	ports := freePorts(t, 2)
	uiPort, fleetPort := ports[0], ports[1]
	codec := "http://127.0.0.1:" + fleetPort + fleetui.CodecPath
	srv := devserver.Start(t, devserver.Options{UIPort: uiPort, ExtraArgs: []string{"--ui-codec-endpoint", codec}})

	cfg := config.Default()
	cfg.Temporal.Address = srv.HostPort()
	cfg.Temporal.UIURL = "http://127.0.0.1:" + uiPort
	cfg.Worker.UIListen = "127.0.0.1:" + fleetPort
	_, stop, err := workerapp.ServeFleet(srv.Client(), cfg, nil, zerolog.Nop())
	require.NoError(t, err)
	t.Cleanup(func() { _ = stop(context.Background()) })

	// A workflow no worker runs: its start event holds the input as stored.
	in := bulkInput{Note: "decoded by the worker's codec endpoint"}
	for i := range 2000 {
		in.Machines = append(in.Machines, fmt.Sprintf("edge-%04d", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	id := "codec-check"
	run, err := srv.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "nobody-polls"}, "meshroll.codec-check", in)
	require.NoError(t, err)
	ev, err := srv.Client().GetWorkflowHistory(ctx, id, "", false, 0).Next()
	require.NoError(t, err)
	stored := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0]
	require.Equal(t, "binary/zlib", string(stored.GetMetadata()["encoding"]), "the input is stored compressed (%d bytes, compressed from %d and more)", len(stored.GetData()), payloads.CompressAbove)

	// The CLI: plain only through the endpoint.
	cli, err := devserver.CLIPath()
	require.NoError(t, err)
	shown := func(extra ...string) (encoding, data string) {
		args := append([]string{"workflow", "show", "--workflow-id", id, "--address", srv.HostPort(), "--namespace", srv.Namespace(), "--output", "json"}, extra...)
		out, err := exec.CommandContext(ctx, cli, args...).Output()
		require.NoError(t, err, "temporal %s", strings.Join(args, " "))
		var h struct {
			Events []struct {
				Started struct {
					Input struct {
						Payloads []struct {
							Metadata map[string][]byte `json:"metadata"`
							Data     []byte            `json:"data"`
						} `json:"payloads"`
					} `json:"input"`
				} `json:"workflowExecutionStartedEventAttributes"`
			} `json:"events"`
		}
		require.NoError(t, json.Unmarshal(out, &h), "temporal workflow show --output json")
		require.NotEmpty(t, h.Events)
		require.Len(t, h.Events[0].Started.Input.Payloads, 1)
		p := h.Events[0].Started.Input.Payloads[0]
		return string(p.Metadata["encoding"]), string(p.Data)
	}
	enc, _ := shown()
	require.Equal(t, "binary/zlib", enc, "without the codec endpoint the CLI shows the payload as stored")
	enc, data := shown("--codec-endpoint", codec)
	require.Equal(t, "json/plain", enc, "the CLI reads the payload through the codec endpoint")
	var got bulkInput
	require.NoError(t, json.Unmarshal([]byte(data), &got))
	require.Equal(t, in, got, "the payload decoded is what was written")

	// The Web UI, from the browser, across origins.
	bctx, bcancel := context.WithTimeout(browserTab(t, browser), 3*time.Minute)
	defer bcancel()
	// The run's own page: the workflow's page would first look its run up
	// in a visibility list, which is not what this test reads.
	page := "http://127.0.0.1:" + uiPort + "/namespaces/" + url.PathEscape(srv.Namespace()) + "/workflows/" + url.PathEscape(id) + "/" + url.PathEscape(run.GetRunID())
	err = openPage(t, bctx, page, `document.body && document.body.innerText.includes("edge-0001")`, 90*time.Second)
	if dir := os.Getenv("MESHROLL_UI_SCREENSHOT"); dir != "" {
		png, serr := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		require.NoError(t, serr)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "ui-decoded-payload.png"), png, 0o644))
	}
	require.NoError(t, err, "the Web UI shows the decoded input of %s", id)
}
