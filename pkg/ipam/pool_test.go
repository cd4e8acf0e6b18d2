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

package ipam

import "testing"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name               string
		addresses, exclude []string
		gateway            string
		size               int
		first              string
		wantErr            bool
	}{
		{"a /29 without network and broadcast", []string{"192.0.2.0/29"}, nil, "", 6, "192.0.2.1", false},
		{"gateway and exclusions left out", []string{"192.0.2.0/29"}, []string{"192.0.2.2-192.0.2.3"}, "192.0.2.1", 3, "192.0.2.4", false},
		{"a range and an address, deduplicated", []string{"10.0.0.5-10.0.0.7", "10.0.0.7", "10.0.0.9"}, nil, "", 4, "10.0.0.5", false},
		{"a /31 keeps both", []string{"198.51.100.0/31"}, nil, "", 2, "198.51.100.0", false},
		{"IPv6", []string{"2001:db8::/126"}, []string{"2001:db8::"}, "", 3, "2001:db8::1", false},
		{"range backwards", []string{"10.0.0.9-10.0.0.5"}, nil, "", 0, "", true},
		{"range across families", []string{"10.0.0.1-2001:db8::1"}, nil, "", 0, "", true},
		{"not an address", []string{"pool"}, nil, "", 0, "", true},
		{"bad gateway", []string{"10.0.0.1"}, nil, "gw", 0, "", true},
		{"too large", []string{"10.0.0.0/8"}, nil, "", 0, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.addresses, tc.exclude, tc.gateway)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if p.Size() != tc.size {
				t.Errorf("size %d, want %d", p.Size(), tc.size)
			}
			if got, _ := p.Next(nil); got != tc.first {
				t.Errorf("first %s, want %s", got, tc.first)
			}
		})
	}
}

func TestNext(t *testing.T) {
	p, err := Parse([]string{"192.0.2.10-192.0.2.12"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	var got []string
	for {
		a, ok := p.Next(used)
		if !ok {
			break
		}
		used[a] = true
		got = append(got, a)
	}
	if len(got) != 3 || got[0] != "192.0.2.10" || got[2] != "192.0.2.12" {
		t.Errorf("handed out %v", got)
	}
	if !p.Contains("192.0.2.11") || p.Contains("192.0.2.13") || p.Contains("x") {
		t.Error("Contains")
	}
}
