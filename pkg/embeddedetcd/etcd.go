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
// Package embeddedetcd runs a single-member etcd inside the banlieue process,
// on loopback, so that a local server needs no separate database. Production
// installs point --etcd-servers at a real cluster instead.
package embeddedetcd

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/firestoned/banlieue/pkg/loopback"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/klog/v2"
)

// Etcd is a running embedded etcd.
type Etcd struct {
	etcd *embed.Etcd
	// ClientURL is where clients reach it, e.g. http://127.0.0.1:41234.
	ClientURL string
}

// Start starts etcd with its data in dataDir (created if missing). Objects
// survive a restart on the same dataDir. The client port is clientPort, or
// any free port when 0.
func Start(dataDir string, clientPort int) (*Etcd, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating etcd data dir: %w", err)
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	// Not clientPort, picked by the caller and not bound yet.
	peerPort := clientPort
	for peerPort == clientPort {
		if peerPort, err = freePort(); err != nil {
			return nil, err
		}
	}
	cfg := embed.NewConfig()
	cfg.Name = "banlieue"
	cfg.Dir = abs
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	clientURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", clientPort)}
	peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", peerPort)}
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// No metrics listener of its own: banlieue serves its own /metrics.
	cfg.ListenMetricsUrls = nil

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting embedded etcd in %s: %w", abs, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd failed: %w", err)
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s not ready after 60s", abs)
	}
	addr := e.Clients[0].Addr().String()
	klog.InfoS("Embedded etcd ready", "dataDir", abs, "client", addr)
	return &Etcd{etcd: e, ClientURL: "http://" + addr}, nil
}

// Stop stops etcd and waits for it to release its data dir.
func (e *Etcd) Stop() {
	e.etcd.Close()
}

func freePort() (int, error) { return loopback.FreePort() }
