// CoreDNS with only the plugins the real test node's Corefile uses
// (tests/src/cluster/real_node/coredns.rs). CoreDNS's own main imports every plugin, and with
// them the cloud providers' SDKs; plugins register themselves when imported, and the directive
// order is CoreDNS's own list, so naming fewer plugins here changes nothing else.
package main

import (
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/template"
)

func main() {
	coremain.Run()
}
