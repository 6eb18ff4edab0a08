package docgen

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestChartValues(t *testing.T) {
	values := `# Values of a chart.
# Second line.

name: ""
hub:
  # address is the hub's <address>.
  address: ""
  transport: auto # auto, quic or websocket
  # ports, listed.
  ports: [7443, "8080"]
# Resources.
resources:
  requests:
    cpu: 50m
  limits: {}
rules:
  - apiGroups: [""]
    resources: [configmaps]
`
	want := "Values of a chart. Second line.\n\n" +
		"| value | default | meaning |\n" +
		"|---|---|---|\n" +
		"| `name` | `\"\"` |  |\n" +
		"| `hub.address` | `\"\"` | address is the hub's &lt;address&gt;. |\n" +
		"| `hub.transport` | `auto` | auto, quic or websocket |\n" +
		"| `hub.ports` | `[7443, \"8080\"]` | ports, listed. |\n" +
		"| `resources` |  | Resources. |\n" +
		"| `resources.requests.cpu` | `50m` |  |\n" +
		"| `resources.limits` | `{}` |  |\n" +
		"| `rules` | `[{apiGroups: [\"\"], resources: [configmaps]}]` |  |\n"
	got, err := ChartValues([]byte(values))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ChartValues (-want +got):\n%s", diff)
	}
	if _, err := ChartValues([]byte("- a list\n")); err == nil {
		t.Error("ChartValues of a list: no error")
	}
}
