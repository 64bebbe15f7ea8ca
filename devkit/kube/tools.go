//go:build tools

// The upstream commands this module builds; the blank imports keep them in go.mod and go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
