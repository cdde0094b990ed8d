package registry

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/meshroll/meshroll/internal/syncbuf"
)

// A builder asks for blobs and manifests it has yet to push: the 404s
// are the registry working, and write nothing to the worker's log.
func TestServerLogsNoErrorForWhatIsNotThereYet(t *testing.T) {
	var log syncbuf.Buffer
	s, err := New(t.TempDir(), WithLog(&log))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	defer s.Close()
	for _, path := range []string{
		"/v2/meshroll/host/blobs/sha256:" + strings.Repeat("0", 64),
		"/v2/meshroll/host/manifests/0123456789abcdef",
	} {
		req, _ := http.NewRequest(http.MethodHead, hs.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("HEAD %s: %d, want 404", path, resp.StatusCode)
		}
	}
	if got := log.String(); got != "" {
		t.Fatalf("the registry logged a client's 404:\n%s", got)
	}
}

// What the filter keeps: a server's own failures, and every line that is
// not about a response.
func TestQuietClientErrorsKeepsServerErrors(t *testing.T) {
	f := quietClientErrors{&logrus.TextFormatter{DisableColors: true}}
	for _, tc := range []struct {
		data logrus.Fields
		kept bool
	}{
		{logrus.Fields{"http.response.status": 404}, false},
		{logrus.Fields{"http.response.status": 400}, false},
		{logrus.Fields{"http.response.status": 500}, true},
		{logrus.Fields{"http.response.status": 503}, true},
		{logrus.Fields{"driver": "filesystem"}, true},
	} {
		out, err := f.Format(&logrus.Entry{Logger: logrus.New(), Data: tc.data, Level: logrus.ErrorLevel, Message: "response completed with error"})
		if err != nil {
			t.Fatal(err)
		}
		if kept := len(out) > 0; kept != tc.kept {
			t.Errorf("%v: kept %v, want %v", tc.data, kept, tc.kept)
		}
	}
}
