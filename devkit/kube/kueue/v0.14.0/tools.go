//go:build tools

// The upstream command this module builds; the blank import keeps it in go.mod and go.sum.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
