#!/usr/bin/env bash
# Regenerates everything derived from the types of api/: deep copies and
# CRD manifests (controller-gen), and the typed clientset, listers and
# informers (code-generator). Run from anywhere; `make generate` runs it.
# The generators come from the Go module proxy at pinned versions through
# `go install pkg@version`, so go.mod is not touched and the output depends
# only on the sources. They are built once per version (and Go version)
# into $GENERATORS_DIR, default .cache/generators (git-ignored).
#
# With --check, api/ is left alone: the generators run on a temporary copy
# of api/ (and go.mod, go.sum), and the script fails, showing the
# difference, if generation would change api/; a pass is remembered in
# $GENERATORS_DIR/checked, so the same inputs are not checked twice.
# `make vet` runs that (through `make generate-check`).
set -euo pipefail

GO="${GO:-go}"

CONTROLLER_TOOLS_VERSION="v0.19.0"
CODEGEN_VERSION="v0.37.2" # matches k8s.io/client-go in go.mod

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "${root}"

generators="${GENERATORS_DIR:-${root}/.cache/generators}"
mkdir -p "${generators}"
generators="$(cd "${generators}" && pwd)"

case "${1:-}" in
"" | --check) ;;
*)
	echo "usage: $0 [--check]" >&2
	exit 2
	;;
esac

if [[ "${1:-}" == "--check" ]]; then
	# A check that passed is not run again on the same inputs: api/ (this
	# script included), go.mod, go.sum and the Go version, all that
	# generation depends on besides the pinned generators.
	stamp="${generators}/checked"
	inputs="$({
		"${GO}" env GOVERSION
		cat go.mod go.sum
		find api -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
	} | sha256sum | cut -d' ' -f1)"
	if [[ "$(cat "${stamp}" 2>/dev/null)" == "${inputs}" ]]; then
		echo "api/ is up to date with its types (unchanged since the last check)"
		exit 0
	fi
	tmp="$(mktemp -d)"
	trap 'rm -rf "${tmp}"' EXIT
	cp go.mod go.sum "${tmp}/"
	cp -R api "${tmp}/api"
	if ! GO="${GO}" GENERATORS_DIR="${generators}" "${tmp}/api/hack/generate.sh" >"${tmp}/generate.log" 2>&1; then
		cat "${tmp}/generate.log" >&2
		echo "generate.sh --check: generation failed (above)" >&2
		exit 1
	fi
	if ! diff -r -q api "${tmp}/api" >/dev/null; then
		echo "api/ is not what its types generate; the difference (first 100 lines):" >&2
		diff -r -u api "${tmp}/api" | sed -e "s#${tmp}/#generated/#g" | head -n 100 >&2 || true
		echo "generate.sh --check: api/ is stale: run \`make generate\` and commit the result" >&2
		exit 1
	fi
	echo "${inputs}" >"${stamp}"
	echo "api/ is up to date with its types"
	exit 0
fi

# build_generators builds the commands pkgs (of one module, at version) into
# ${generators}/GOVERSION/dir unless they are there, and prints that folder.
build_generators() {
	local dir="${generators}/${go_version}/$1" version="$2" pkgs=("${@:3}") p missing=()
	for p in "${pkgs[@]}"; do
		[[ -x "${dir}/${p##*/}" ]] || missing+=("${p}@${version}")
	done
	if ((${#missing[@]})); then
		echo "building ${missing[*]} into ${dir}" >&2
		GOBIN="${dir}" "${GO}" install "${missing[@]}"
	fi
	echo "${dir}"
}
go_version="$("${GO}" env GOVERSION)"
controller_tools="$(build_generators "controller-tools@${CONTROLLER_TOOLS_VERSION}" "${CONTROLLER_TOOLS_VERSION}" \
	sigs.k8s.io/controller-tools/cmd/controller-gen)"
code_generator="$(build_generators "code-generator@${CODEGEN_VERSION}" "${CODEGEN_VERSION}" \
	k8s.io/code-generator/cmd/client-gen k8s.io/code-generator/cmd/lister-gen k8s.io/code-generator/cmd/informer-gen)"

module="$(${GO} list -m)"
apis=(api/v1alpha1 api/apps/v1alpha1)
header="api/hack/boilerplate.go.txt"
client_dir="api/client"
client_pkg="${module}/${client_dir}"

echo "deep copies and CRDs (controller-gen ${CONTROLLER_TOOLS_VERSION})"
rm -f api/crds/*.yaml
paths=()
for a in "${apis[@]}"; do paths+=("paths=./${a}"); done
"${controller_tools}/controller-gen" object crd:crdVersions=v1 "${paths[@]}" output:crd:artifacts:config=api/crds

echo "clientset, listers and informers (code-generator ${CODEGEN_VERSION})"
rm -rf "${client_dir}/clientset" "${client_dir}/listers" "${client_dir}/informers"
inputs=()
for a in "${apis[@]}"; do inputs+=(--input "${a}"); done
"${code_generator}/client-gen" \
	--go-header-file "${header}" \
	--input-base "${module}" "${inputs[@]}" \
	--output-dir "${client_dir}/clientset" \
	--output-pkg "${client_pkg}/clientset" \
	--clientset-name versioned
"${code_generator}/lister-gen" \
	--go-header-file "${header}" \
	--output-dir "${client_dir}/listers" \
	--output-pkg "${client_pkg}/listers" \
	"${apis[@]/#/./}"
"${code_generator}/informer-gen" \
	--go-header-file "${header}" \
	--output-dir "${client_dir}/informers" \
	--output-pkg "${client_pkg}/informers" \
	--versioned-clientset-package "${client_pkg}/clientset/versioned" \
	--listers-package "${client_pkg}/listers" \
	"${apis[@]/#/./}"
