//go:build tools

// kube-controller-manager, from the k8s.io/kubernetes pinned in ../go.mod: this module is derived from that one
// (build.sh --regen writes its go.mod from ../go.mod and tidies it; build.sh refuses a different pin).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
