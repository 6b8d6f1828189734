//go:build tools

// Package tools keeps `go mod tidy` from dropping the requirement of the program this module
// exists to build (the build constraint keeps it from ever being compiled); hack/build-helm.sh
// names the main package on the go build command line.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
