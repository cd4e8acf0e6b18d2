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

package providers

import (
	"strings"
	"testing"
)

// TestSessionKey: every setting that decides what a session is changes
// the key; the key holds no secret in the clear.
func TestSessionKey(t *testing.T) {
	s := NewSessions(SessionHooks[int]{})
	base := Connection{
		Endpoint: "https://vc.example/sdk", CABundle: []byte("CA"), CredentialsVersion: "7",
		Credentials: Credentials{Username: "admin", Password: "hunter2", ClientCertificate: []byte("CERT"), ClientKey: []byte("KEY")},
		Hosts:       []Host{{Name: "a", Endpoint: "qemu+tls://a/system"}},
	}
	k := s.Key(base)
	if k != s.Key(base) {
		t.Fatal("the key is not stable")
	}
	for name, change := range map[string]func(*Connection){
		"endpoint":     func(c *Connection) { c.Endpoint += "x" },
		"host":         func(c *Connection) { c.Hosts[0].Endpoint += "x" },
		"another host": func(c *Connection) { c.Hosts = append(c.Hosts, Host{Name: "b"}) },
		"user":         func(c *Connection) { c.Credentials.Username += "x" },
		"password":     func(c *Connection) { c.Credentials.Password += "x" },
		"certificate":  func(c *Connection) { c.Credentials.ClientCertificate = []byte("CERT2") },
		"client key":   func(c *Connection) { c.Credentials.ClientKey = []byte("KEY2") },
		"version":      func(c *Connection) { c.CredentialsVersion = "8" },
		"CA bundle":    func(c *Connection) { c.CABundle = []byte("CA2") },
		"insecure":     func(c *Connection) { c.InsecureSkipTLSVerify = true },
		// Length-prefixed fields: moving a byte across a boundary counts.
		"boundary": func(c *Connection) { c.Credentials.Username, c.Credentials.Password = "adminh", "unter2" },
	} {
		c := base
		c.Hosts = append([]Host(nil), base.Hosts...)
		change(&c)
		if s.Key(c) == k {
			t.Errorf("changing the %s kept the key", name)
		}
	}
	for _, secret := range []string{"hunter2", "admin", "KEY"} {
		if strings.Contains(k, secret) {
			t.Errorf("the key holds %q", secret)
		}
	}
	if NewSessions(SessionHooks[int]{}).Key(base) == k {
		t.Error("two caches share keys: the fingerprint is not salted")
	}
}
