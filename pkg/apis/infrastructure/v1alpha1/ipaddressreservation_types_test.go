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

package v1alpha1

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestReservationName(t *testing.T) {
	for _, tc := range []struct {
		pool, address, want string
		wantErr             bool
	}{
		{"lab", "192.168.150.200", "lab.192-168-150-200", false},
		{"lab.example", "10.0.0.1", "lab.example.10-0-0-1", false},
		{"lab", "2001:db8::1", "lab.2001-0db8-0000-0000-0000-0000-0000-0001", false},
		// Compressed, these would begin or end with a dash.
		{"lab", "::1", "lab.0000-0000-0000-0000-0000-0000-0000-0001", false},
		{"lab", "fd00::", "lab.fd00-0000-0000-0000-0000-0000-0000-0000", false},
		// Upper case is the same address, and names are lower case.
		{"lab", "2001:DB8::A", "lab.2001-0db8-0000-0000-0000-0000-0000-000a", false},
		// IPv4-mapped: hex groups, not ::ffff:1-2-3-4, which is
		// ::ffff:1:2:3:4's.
		{"lab", "::ffff:1.2.3.4", "lab.0000-0000-0000-0000-0000-ffff-0102-0304", false},
		{"lab", "::ffff:1:2:3:4", "lab.0000-0000-0000-ffff-0001-0002-0003-0004", false},
		{"lab", "fe80::1%eth0", "", true},
		{"lab", "pool", "", true},
		{"lab", "", "", true},
		{"Lab", "10.0.0.1", "", true},
		{strings.Repeat("p", MaxPoolNameLength), "2001:db8::1", "", false},
		{strings.Repeat("p", MaxPoolNameLength+1), "2001:db8::1", "", true},
	} {
		t.Run(tc.pool+"/"+tc.address, func(t *testing.T) {
			got, err := ReservationName(tc.pool, tc.address)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ReservationName(%q, %q) = %q, %v; want error %v", tc.pool, tc.address, got, err, tc.wantErr)
			}
			if tc.want != "" && got != tc.want {
				t.Errorf("ReservationName(%q, %q) = %q, want %q", tc.pool, tc.address, got, tc.want)
			}
		})
	}
}

// TestReservationNameDistinct: distinct (pool, address) pairs never share a
// name and every name is a valid object name, over addresses of both
// families near the edges the encoding must keep apart (zero runs, IPv4 and
// IPv4-mapped, pool names with dots).
func TestReservationNameDistinct(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var addrs []netip.Addr
	for range 3000 {
		var b16 [16]byte
		var b4 [4]byte
		for i := range b16 {
			if rng.IntN(3) > 0 { // mostly zeros: runs to compress
				b16[i] = byte(rng.IntN(256))
			}
		}
		for i := range b4 {
			b4[i] = byte(rng.IntN(4))
		}
		// An IPv6 address, an IPv4 one and the same mapped into IPv6.
		addrs = append(addrs, netip.AddrFrom16(b16), netip.AddrFrom4(b4), netip.AddrFrom16(netip.AddrFrom4(b4).As16()))
	}
	pools := []string{"a", "a.b", "a-1", "b"}
	seen := map[string]string{}
	for _, pool := range pools {
		for _, a := range addrs {
			key := pool + " " + a.String()
			name, err := ReservationName(pool, a.String())
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
				t.Fatalf("%s: name %q: %v", key, name, errs)
			}
			if other, ok := seen[name]; ok && other != key {
				t.Fatalf("%s and %s are both %q", other, key, name)
			}
			seen[name] = key
		}
	}
}
