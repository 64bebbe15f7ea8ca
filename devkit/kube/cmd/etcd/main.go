// Command etcd is upstream etcd's server entry point (go.etcd.io/etcd/server/v3/etcdmain), built from the
// version pinned in this module's go.mod. Only the three lines below are ours.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
