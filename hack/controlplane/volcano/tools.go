//go:build tools

// Package tools keeps `go mod tidy` from dropping the requirements of the programs this module
// exists to build. Main packages cannot be imported, so it imports what those mains import; the
// build script names the mains themselves on the go build command line.
package tools

import (
	_ "volcano.sh/volcano/cmd/controller-manager/app"
	_ "volcano.sh/volcano/cmd/scheduler/app"
	_ "volcano.sh/volcano/pkg/controllers/job"
	_ "volcano.sh/volcano/pkg/controllers/podgroup"
	_ "volcano.sh/volcano/pkg/controllers/queue"
	_ "volcano.sh/volcano/pkg/scheduler/actions"
	_ "volcano.sh/volcano/pkg/scheduler/plugins"
)
