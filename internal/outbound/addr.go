package outbound

import (
	"net/netip"
	"slices"

	"github.com/packrun/packrun/packs"
)

var (
	metadataAddrs = []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("100.100.100.200")}
	privateNets   = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("fc00::/7")}
	neverNets = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("255.255.255.255/32"),
		netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("2002::/16")}
)

// refusal says why addr may not be dialled under a grant allowing the
// ranges allow, or "" when it may. Metadata addresses, unspecified,
// multicast, broadcast and translated (NAT64, 6to4) addresses are refused
// whatever the grant says; loopback, private and link-local ones only
// when the grant names their range.
func refusal(addr netip.Addr, allow []string) string {
	addr = addr.Unmap()
	switch {
	case slices.Contains(metadataAddrs, addr):
		return "a cloud metadata address"
	case addr.IsUnspecified():
		return "an unspecified address"
	case addr.IsMulticast():
		return "a multicast address"
	case slices.ContainsFunc(neverNets, func(p netip.Prefix) bool { return p.Contains(addr) }):
		return "a reserved or translated address"
	case addr.IsLoopback():
		if !slices.Contains(allow, packs.RangeLoopback) {
			return "a loopback address (allowRanges: loopback)"
		}
	case addr.IsLinkLocalUnicast():
		if !slices.Contains(allow, packs.RangeLinkLocal) {
			return "a link-local address (allowRanges: link-local)"
		}
	case slices.ContainsFunc(privateNets, func(p netip.Prefix) bool { return p.Contains(addr) }):
		if !slices.Contains(allow, packs.RangePrivate) {
			return "a private address (allowRanges: private)"
		}
	}
	return ""
}
