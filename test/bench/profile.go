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
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	restclient "k8s.io/client-go/rest"
)

// profileSeconds is how long a CPU profile of a CRUD verb samples: shorter
// than the fastest profiled phase at the default N, so it sees only that
// phase.
const profileSeconds = 8

// startProfile samples the server behind cfg's /debug/pprof for seconds
// while a phase runs, and writes the profile to dir as <name>.pprof. The returned function waits for it; a failure is reported,
// never fatal (profiles are a diagnosis aid, not a measurement).
func startProfile(ctx context.Context, cfg *restclient.Config, dir, name string, seconds int) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := fetchProfile(ctx, cfg, filepath.Join(dir, name+".pprof"), seconds); err != nil {
			logf("  profile %s: %v", name, err)
		}
	}()
	return func() { <-done }
}

func fetchProfile(ctx context.Context, cfg *restclient.Config, file string, seconds int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Duration(seconds)*time.Second)
	defer cancel()
	path := fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds)
	body, status, err := rawGet(ctx, cfg, path, "*/*")
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("GET %s: HTTP %d", path, status)
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(file, body, 0o644); err != nil {
		return err
	}
	logf("  profile written to %s", file)
	return nil
}

// profileSelf samples this process's CPU for d into dir as <name>.pprof;
// the returned function waits for it.
func profileSelf(dir, name string, d time.Duration) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			logf("  profile %s: %v", name, err)
			return
		}
		f, err := os.Create(filepath.Join(dir, name+".pprof"))
		if err != nil {
			logf("  profile %s: %v", name, err)
			return
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			logf("  profile %s: %v", name, err)
			return
		}
		time.Sleep(d)
		pprof.StopCPUProfile()
		logf("  profile written to %s", f.Name())
	}()
	return func() { <-done }
}

// pprofAddr is a free loopback address for a process's -pprof-bind-address.
func pprofAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// heapProfile writes the live heap of the server behind cfg (garbage
// collected first) to dir as <name>.pprof; a failure is reported, never
// fatal.
func heapProfile(ctx context.Context, cfg *restclient.Config, dir, name string) {
	body, status, err := rawGet(ctx, cfg, "/debug/pprof/heap?gc=1", "*/*")
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("HTTP %d", status)
	}
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".pprof"), body, 0o644)
	}
	if err != nil {
		logf("  heap profile %s: %v", name, err)
		return
	}
	logf("  heap profile written to %s", filepath.Join(dir, name+".pprof"))
}
