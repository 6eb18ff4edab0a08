package apiserver

import (
	"encoding/json"
	"net/http"
	"strings"

	apimachineryversion "k8s.io/apimachinery/pkg/version"

	"github.com/flotilla-io/flotilla/internal/version"
)

// versionHandler answers GET /version with the embedded Kubernetes release
// and the hub's own version (gitVersion v1.37.2+flotilla.VERSION), whatever
// flags the binary was linked with; everything else goes to next. It sits
// inside the authentication and authorization filters.
func versionHandler(next http.Handler, info version.Info) http.Handler {
	body, _ := json.MarshalIndent(versionInfo(info), "", "  ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" || r.Method != http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
}

func versionInfo(info version.Info) apimachineryversion.Info {
	major, minor, _ := strings.Cut(strings.TrimPrefix(info.Kubernetes, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	tree := "clean"
	if info.Modified {
		tree = "dirty"
	}
	return apimachineryversion.Info{
		Major:        major,
		Minor:        minor,
		GitVersion:   info.KubernetesGitVersion(),
		GitCommit:    info.Revision,
		GitTreeState: tree,
		BuildDate:    info.BuildTime,
		GoVersion:    info.GoVersion,
		Compiler:     "gc",
		Platform:     info.Platform,
	}
}
