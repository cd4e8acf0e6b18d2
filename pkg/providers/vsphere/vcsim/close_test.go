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

package vcsim

import (
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	"github.com/vmware/govmomi/simulator"
)

// TestCloseServerGivesUp: a request whose handler never returns (as
// vcsim's WaitForUpdatesEx for a client that is gone) no longer holds the
// close; a simulator with nothing in flight closes at once.
func TestCloseServerGivesUp(t *testing.T) {
	model := simulator.VPX()
	if err := model.Create(); err != nil {
		t.Fatal(err)
	}
	defer model.Remove()
	srv := model.Service.NewServer()
	stuck, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	srv.Server.Config.Handler = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(stuck)
		<-release
	})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	go func() { _, _ = client.Get(srv.URL.String()) }()
	<-stuck
	start := time.Now()
	if CloseServer(srv, 300*time.Millisecond) {
		t.Error("CloseServer said every request ended while one was stuck")
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("CloseServer waited %s", waited)
	}

	other := simulator.VPX()
	if err := other.Create(); err != nil {
		t.Fatal(err)
	}
	defer other.Remove()
	if !CloseServer(other.Service.NewServer(), 30*time.Second) {
		t.Error("a simulator with nothing in flight did not close")
	}
}
