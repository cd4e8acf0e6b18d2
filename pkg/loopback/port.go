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

// Package loopback hands test and local-environment servers a loopback
// port to listen on later.
package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
)

// The range ports come from: below Linux's ephemeral range (32768–60999),
// which every outgoing connection draws its source port from. A port
// picked there (what listening on :0 does) and bound only later, when its
// server starts, can meanwhile become the source port of some client's
// connection to another server: "address already in use", seen under load.
const (
	low  = 20000
	high = 32768
)

// FreePort returns a port of 127.0.0.1 that nothing listens on now.
func FreePort() (int, error) {
	var last error
	for range 100 {
		port := low + rand.IntN(high-low)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			last = err
			continue
		}
		_ = l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("finding a free port: %w", last)
}

// FreePorts is n distinct free ports. Ports picked one by one, before any
// is bound, may repeat (each is free when picked): two servers of one
// environment given the same port fail to start, one of them at random.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	seen := map[int]bool{}
	for len(ports) < n {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		if !seen[port] {
			seen[port] = true
			ports = append(ports, port)
		}
	}
	return ports, nil
}
