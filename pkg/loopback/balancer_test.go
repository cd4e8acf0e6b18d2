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

package loopback

import (
	"bufio"
	"net"
	"strconv"
	"testing"
)

// echoName serves connections by writing name and closing.
func echoName(t *testing.T, name string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(name + "\n"))
			c.Close()
		}
	}()
	return l.Addr().String()
}

// TestBalancer: connections go round robin to the replicas that accept
// them, a dead one skipped; after Close the port refuses.
func TestBalancer(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dead, err := FreePort() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	b, err := NewBalancer(addr, []string{echoName(t, "a"), net.JoinHostPort("127.0.0.1", strconv.Itoa(dead)), echoName(t, "b")})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for range 6 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil {
			t.Fatalf("through the balancer: %v", err)
		}
		seen[line[:len(line)-1]]++
	}
	if len(seen) != 2 || seen["a"] == 0 || seen["b"] == 0 {
		t.Errorf("replies %v, want both live replicas and only them", seen)
	}
	b.Close()
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Error("the balancer's port still accepts after Close")
	}
}
