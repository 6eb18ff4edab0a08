package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestKubeconfigCommand(t *testing.T) {
	dir := t.TempDir()
	admin := clientcmdapi.NewConfig()
	admin.Clusters["flotilla"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443", CertificateAuthorityData: []byte("ca")}
	admin.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: "secret"}
	admin.Contexts["flotilla"] = &clientcmdapi.Context{Cluster: "flotilla", AuthInfo: "admin"}
	admin.CurrentContext = "flotilla"
	if err := clientcmd.WriteToFile(*admin, filepath.Join(dir, "admin.kubeconfig")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantServer string
		wantErr    string
	}{
		{name: "as written", args: []string{"--data-dir", dir}, wantServer: "https://127.0.0.1:6443"},
		{name: "other server", args: []string{"--data-dir", dir, "--server", "https://hub.example.com:6443"}, wantServer: "https://hub.example.com:6443"},
		{name: "plain http", args: []string{"--data-dir", dir, "--server", "http://hub:6443"}, wantErr: "want https://HOST:PORT"},
		{name: "no hub here", args: []string{"--data-dir", filepath.Join(dir, "nothing")}, wantErr: "start flotilla-hub with this --data-dir first"},
		{name: "stray argument", args: []string{"--data-dir", dir, "extra"}, wantErr: "takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), append([]string{"kubeconfig"}, tt.args...), &stdout, &stderr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if stdout.Len() > 0 {
					t.Errorf("printed a kubeconfig anyway: %s", stdout.String())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := clientcmd.Load(stdout.Bytes())
			if err != nil {
				t.Fatalf("printed kubeconfig does not load: %v\n%s", err, stdout.String())
			}
			if s := got.Clusters["flotilla"].Server; s != tt.wantServer {
				t.Errorf("server %q, want %q", s, tt.wantServer)
			}
			if got.AuthInfos["admin"].Token != "secret" || got.CurrentContext != "flotilla" {
				t.Errorf("credentials or context lost: %+v", got)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "nothing")); !os.IsNotExist(err) {
		t.Errorf("created the missing data dir")
	}
}
