/*
Copyright The banlieue Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

	http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package ipam is the arithmetic of banlieue's in-cluster IP pools: which
// addresses a pool holds and which one to hand out next. Pure; the pool
// controller (pkg/controllers/ippool) does the API calls.
package ipam

import (
	"fmt"
	"math/big"
	"net/netip"
	"strings"
)

// Pool is a parsed pool: its addresses in order, minus the excluded ones
// and the gateway.
type Pool struct {
	addrs []netip.Addr
}

// MaxSize bounds a pool: its addresses are listed to find a free one.
const MaxSize = 1 << 16

// Parse reads a pool's addresses (CIDRs, FIRST-LAST ranges, single
// addresses), its excluded ones and its gateway.
func Parse(addresses, excluded []string, gateway string) (*Pool, error) {
	out := map[netip.Addr]bool{}
	var order []netip.Addr
	for _, a := range addresses {
		as, err := expand(a)
		if err != nil {
			return nil, err
		}
		for _, x := range as {
			if !out[x] {
				out[x] = true
				order = append(order, x)
			}
		}
		if len(order) > MaxSize {
			return nil, fmt.Errorf("more than %d addresses", MaxSize)
		}
	}
	drop := map[netip.Addr]bool{}
	for _, e := range excluded {
		as, err := expand(e)
		if err != nil {
			return nil, fmt.Errorf("excluded: %w", err)
		}
		for _, x := range as {
			drop[x] = true
		}
	}
	if gateway != "" {
		g, err := netip.ParseAddr(gateway)
		if err != nil {
			return nil, fmt.Errorf("gateway %q is not an IP address", gateway)
		}
		drop[g] = true
	}
	p := &Pool{}
	for _, x := range order {
		if !drop[x] {
			p.addrs = append(p.addrs, x)
		}
	}
	return p, nil
}

// Size is how many addresses the pool hands out.
func (p *Pool) Size() int { return len(p.addrs) }

// Contains tells whether the pool hands out a.
func (p *Pool) Contains(a string) bool {
	x, err := netip.ParseAddr(a)
	if err != nil {
		return false
	}
	for _, y := range p.addrs {
		if x == y {
			return true
		}
	}
	return false
}

// Next is the first address of the pool not in used; ok is false when
// every one is.
func (p *Pool) Next(used map[string]bool) (string, bool) {
	for _, x := range p.addrs {
		if !used[x.String()] {
			return x.String(), true
		}
	}
	return "", false
}

// expand lists the addresses of a CIDR, a FIRST-LAST range or an address.
func expand(s string) ([]netip.Addr, error) {
	s = strings.TrimSpace(s)
	switch {
	case strings.Contains(s, "/"):
		prefix, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR: %v", s, err)
		}
		prefix = prefix.Masked()
		first, last := prefix.Addr(), lastOf(prefix)
		if first.Is4() && prefix.Bits() < 31 {
			// The network and broadcast addresses are not a host's.
			first, last = first.Next(), last.Prev()
		}
		return between(first, last, s)
	case strings.Contains(s, "-"):
		a, b, _ := strings.Cut(s, "-")
		first, err1 := netip.ParseAddr(strings.TrimSpace(a))
		last, err2 := netip.ParseAddr(strings.TrimSpace(b))
		if err1 != nil || err2 != nil || first.Is4() != last.Is4() || last.Less(first) {
			return nil, fmt.Errorf("%q is not a range FIRST-LAST of one family, in order", s)
		}
		return between(first, last, s)
	default:
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not an IP address, range or CIDR", s)
		}
		return []netip.Addr{a}, nil
	}
}

func between(first, last netip.Addr, what string) ([]netip.Addr, error) {
	n := new(big.Int).Sub(new(big.Int).SetBytes(last.AsSlice()), new(big.Int).SetBytes(first.AsSlice()))
	if n.Cmp(big.NewInt(MaxSize)) >= 0 {
		return nil, fmt.Errorf("%q holds more than %d addresses", what, MaxSize)
	}
	var out []netip.Addr
	for a := first; a.IsValid() && !last.Less(a); a = a.Next() {
		out = append(out, a)
	}
	return out, nil
}

func lastOf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - uint(i%8))
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
