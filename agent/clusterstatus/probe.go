package clusterstatus

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/client-go/rest"
)

// maxHealthMessage bounds the health message sent to the hub; the protocol
// allows 4 KiB, and an API server's failure list can be longer.
const maxHealthMessage = 1024

// Probe reports nil when the member cluster's API server is healthy.
type Probe func(ctx context.Context) error

// APIServerProbe asks the API server's /readyz, falling back to /healthz on
// servers that do not serve /readyz.
func APIServerProbe(client rest.Interface) Probe {
	return func(ctx context.Context) error {
		code, err := getHealth(ctx, client, "/readyz")
		if code == http.StatusNotFound {
			_, err = getHealth(ctx, client, "/healthz")
		}
		return err
	}
}

// getHealth GETs one health endpoint and returns its HTTP status code (0 if
// there was no response) and an error describing any failure.
func getHealth(ctx context.Context, client rest.Interface, path string) (int, error) {
	var code int
	body, err := client.Get().AbsPath(path).Do(ctx).StatusCode(&code).Raw()
	if err == nil {
		return code, nil
	}
	if code == 0 {
		return 0, fmt.Errorf("GET %s: %w", path, err)
	}
	if failed := failedChecks(string(body)); failed != "" {
		return code, fmt.Errorf("GET %s: HTTP %d: %s", path, code, failed)
	}
	return code, fmt.Errorf("GET %s: HTTP %d: %w", path, code, err)
}

// failedChecks picks the failing checks ("[-]etcd failed: ...") from a
// verbose health response.
func failedChecks(body string) string {
	var failed []string
	for line := range strings.Lines(body) {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "[-]") {
			failed = append(failed, strings.TrimPrefix(line, "[-]"))
		}
	}
	return strings.Join(failed, "; ")
}
