//go:build tools

// The upstream commands this module builds; the blank imports keep them in go.mod and go.sum.
// kube-controller-manager is not here: it needs modules the others do not (cadvisor, CSI, containerd, ...), and
// adding their pins to go.sum would change the stack's cache key; it is built from controller-manager/, a module
// derived from this one (build.sh --regen), into the same cache.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
