package testsuite

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/registry"
)

// The OCI distribution-spec conformance suite at tag v1.1.1, run against the
// embedded registry and, beside it, the CNCF distribution registry that
// Debian packages as docker-registry. The suite is not served by the Go
// module proxy; CI points MESHROLL_CONFORMANCE_SUITE at an unmodified copy
// of its conformance/ directory. docs/registry.md has the figures.
const (
	conformanceSuiteEnv = "MESHROLL_CONFORMANCE_SUITE"
	conformanceTableEnv = "MESHROLL_CONFORMANCE_TABLE"
	cncfRegistryEnv     = "MESHROLL_CNCF_REGISTRY"
)

// conformanceCategories are the suite's four workflows, in its order.
var conformanceCategories = []string{"Pull", "Push", "Content Discovery", "Content Management"}

// conformanceFloor is what the embedded registry passed when it became the
// distribution registry (v3.1.2): every test of Pull, Push and Content
// Management, and all of Content Discovery but the referrers API. A change
// that loses one of them fails here, whatever the CNCF figure.
var conformanceFloor = map[string]int{"Pull": 23, "Push": 26, "Content Discovery": 10, "Content Management": 10}

// conformanceTally counts one category's results.
type conformanceTally struct{ Passed, Failed, Skipped int }

func (c conformanceTally) String() string {
	return fmt.Sprintf("%d/%d", c.Passed, c.Passed+c.Failed)
}

func TestRegistryConformance(t *testing.T) {
	t.Parallel()
	suite := os.Getenv(conformanceSuiteEnv)
	if suite == "" {
		t.Skipf("the OCI conformance suite is not here: set %s to the conformance/ directory of distribution-spec v1.1.1", conformanceSuiteEnv)
	}
	bin := filepath.Join(t.TempDir(), "conformance.test")
	build := exec.Command("go", "test", "-c", "-o", bin, ".")
	build.Dir = suite
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build the conformance suite in %s:\n%s", suite, out)

	srv, err := registry.New(t.TempDir(), registry.WithAccess(registry.Access{Deletes: true}))
	require.NoError(t, err)
	url, err := srv.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	ours := runConformance(t, bin, url)

	var cncf map[string]conformanceTally
	if docker := cncfRegistry(t); docker != "" {
		cncf = runConformance(t, bin, startCNCFRegistry(t, docker))
	}

	table := conformanceTable(ours, cncf)
	t.Log("\n" + table)
	if p := os.Getenv(conformanceTableEnv); p != "" {
		require.NoError(t, os.WriteFile(p, []byte(table), 0o644))
	}
	for _, c := range conformanceCategories {
		if ours[c].Passed < conformanceFloor[c] {
			t.Errorf("%s: the embedded registry passes %s, fewer than the %d it passed before", c, ours[c], conformanceFloor[c])
		}
		if cncf != nil && ours[c].Passed < cncf[c].Passed {
			t.Errorf("%s: the embedded registry passes %s, the CNCF registry %s", c, ours[c], cncf[c])
		}
	}
}

// runConformance runs the suite binary against the registry at url, every
// category enabled, and counts its JUnit report.
func runConformance(t *testing.T, bin, url string) map[string]conformanceTally {
	t.Helper()
	reports := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Dir = reports
	cmd.Env = append(os.Environ(),
		"OCI_ROOT_URL="+url,
		"OCI_NAMESPACE=myorg/myrepo",
		"OCI_CROSSMOUNT_NAMESPACE=myorg/other",
		"OCI_TEST_PULL=1", "OCI_TEST_PUSH=1",
		"OCI_TEST_CONTENT_DISCOVERY=1", "OCI_TEST_CONTENT_MANAGEMENT=1",
		"OCI_REPORT_DIR="+reports,
	)
	// The suite exits 1 when any test fails; the report says which.
	out, runErr := cmd.CombinedOutput()
	raw, err := os.ReadFile(filepath.Join(reports, "junit.xml"))
	require.NoError(t, err, "no JUnit report from the conformance suite against %s (%v):\n%s", url, runErr, out)
	tally, err := tallyConformance(raw)
	require.NoError(t, err)
	return tally
}

// tallyConformance counts a JUnit report of the suite by category, from
// each test's name ("OCI Distribution Conformance Tests <category> ...").
func tallyConformance(raw []byte) (map[string]conformanceTally, error) {
	var report struct {
		Cases []struct {
			Name   string `xml:"name,attr"`
			Status string `xml:"status,attr"`
		} `xml:"testsuite>testcase"`
	}
	if err := xml.Unmarshal(raw, &report); err != nil {
		return nil, fmt.Errorf("conformance report: %w", err)
	}
	tally := map[string]conformanceTally{}
	for _, tc := range report.Cases {
		name, ok := strings.CutPrefix(tc.Name, "OCI Distribution Conformance Tests ")
		if !ok {
			continue
		}
		for _, c := range conformanceCategories {
			if !strings.HasPrefix(name, c+" ") {
				continue
			}
			n := tally[c]
			switch tc.Status {
			case "passed":
				n.Passed++
			case "skipped", "pending":
				n.Skipped++
			default:
				n.Failed++
			}
			tally[c] = n
		}
	}
	if len(tally) == 0 {
		return nil, fmt.Errorf("conformance report names none of the categories %v", conformanceCategories)
	}
	return tally, nil
}

// conformanceTable is the figures as a Markdown table, the embedded
// registry beside the CNCF registry when that ran.
func conformanceTable(ours, cncf map[string]conformanceTally) string {
	var b strings.Builder
	b.WriteString("| category | meshroll's embedded registry | CNCF distribution registry (docker-registry) |\n|---|---|---|\n")
	var total, cncfTotal conformanceTally
	for _, c := range conformanceCategories {
		other := "not run"
		if cncf != nil {
			other = cncf[c].String()
			cncfTotal.Passed += cncf[c].Passed
			cncfTotal.Failed += cncf[c].Failed
		}
		total.Passed += ours[c].Passed
		total.Failed += ours[c].Failed
		fmt.Fprintf(&b, "| %s | %s | %s |\n", c, ours[c], other)
	}
	other := "not run"
	if cncf != nil {
		other = cncfTotal.String()
	}
	fmt.Fprintf(&b, "| all | %s | %s |\n", total, other)
	return b.String()
}

// cncfRegistry finds Debian's docker-registry, which .ci/run installs; a
// local run without it compares with nothing.
func cncfRegistry(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv(cncfRegistryEnv), "docker-registry"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no CNCF registry to compare with: apt-get install docker-registry (or set " + cncfRegistryEnv + ")"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Log(msg)
	return ""
}

// startCNCFRegistry serves docker-registry on a free loopback port with
// deletes enabled (as the embedded one has them) until the test ends, and
// returns its URL once it answers.
func startCNCFRegistry(t *testing.T, bin string) string {
	t.Helper()
	dir := t.TempDir()
	addr := "127.0.0.1:" + freePort(t)
	cfg := fmt.Sprintf("version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n  secret: conformance\n",
		filepath.Join(dir, "data"), addr)
	cfgPath := filepath.Join(dir, "config.yml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg), 0o644))
	cmd := exec.Command(bin, "serve", cfgPath)
	logPath := filepath.Join(dir, "log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logFile.Close()
	})
	url := "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(url + "/v2/")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "docker-registry never answered on %s; its log is %s", addr, logPath)
	return url
}
