#!/usr/bin/env bash
# Regenerates everything derived from the types of api/: deep copies and
# CRD manifests (controller-gen), and the typed clientset, listers and
# informers (code-generator). Run from anywhere; `make generate` runs it.
# The generators come from the Go module proxy at pinned versions through
# `go run pkg@version`, so go.mod is not touched and the output depends only
# on the sources.
set -euo pipefail

GO="${GO:-go}"

CONTROLLER_GEN="sigs.k8s.io/controller-tools/cmd/controller-gen@v0.19.0"
CODEGEN_VERSION="v0.37.2" # matches k8s.io/client-go in go.mod

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "${root}"

module="$(${GO} list -m)"
apis=(api/v1alpha1 api/apps/v1alpha1)
header="api/hack/boilerplate.go.txt"
client_dir="api/client"
client_pkg="${module}/${client_dir}"

echo "deep copies and CRDs (controller-gen)"
rm -f api/crds/*.yaml
paths=()
for a in "${apis[@]}"; do paths+=("paths=./${a}"); done
"${GO}" run "${CONTROLLER_GEN}" object crd:crdVersions=v1 "${paths[@]}" output:crd:artifacts:config=api/crds

echo "clientset, listers and informers (code-generator ${CODEGEN_VERSION})"
rm -rf "${client_dir}/clientset" "${client_dir}/listers" "${client_dir}/informers"
inputs=()
for a in "${apis[@]}"; do inputs+=(--input "${a}"); done
"${GO}" run "k8s.io/code-generator/cmd/client-gen@${CODEGEN_VERSION}" \
	--go-header-file "${header}" \
	--input-base "${module}" "${inputs[@]}" \
	--output-dir "${client_dir}/clientset" \
	--output-pkg "${client_pkg}/clientset" \
	--clientset-name versioned
"${GO}" run "k8s.io/code-generator/cmd/lister-gen@${CODEGEN_VERSION}" \
	--go-header-file "${header}" \
	--output-dir "${client_dir}/listers" \
	--output-pkg "${client_pkg}/listers" \
	"${apis[@]/#/./}"
"${GO}" run "k8s.io/code-generator/cmd/informer-gen@${CODEGEN_VERSION}" \
	--go-header-file "${header}" \
	--output-dir "${client_dir}/informers" \
	--output-pkg "${client_pkg}/informers" \
	--versioned-clientset-package "${client_pkg}/clientset/versioned" \
	--listers-package "${client_pkg}/listers" \
	"${apis[@]/#/./}"
