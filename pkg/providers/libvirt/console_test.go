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

package libvirt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/loopback"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// TestConsoleOverTLS: a console session dials its own connection as the
// Client did, here qemu+tls with the client certificate and CA bundle of
// the Provider's connection, to a real libvirtd listening for TLS; a
// command typed into the guest's shell runs (its arithmetic comes back
// worked out). A domain the host does not have is ErrNoConsole.
// (test/e2e/libvirt TestConsoleOnLibvirt covers busy, takeover, leaks and
// power-off on a VM the provider built.)
func TestConsoleOverTLS(t *testing.T) {
	ca := newCA(t, "banlieue-test-ca")
	serverCert, serverKey := ca.issue(t, "127.0.0.1", true)
	clientCert, clientKey := ca.issue(t, "banlieue-provider", false)
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "libvirtd.log"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d, err := libvirtd.StartTLS(ctx, filepath.Join(dir, "d"), "", log,
		libvirtd.TLS{Port: port, CA: ca.pem, ServerCert: serverCert, ServerKey: serverKey})
	if err != nil {
		b, _ := os.ReadFile(filepath.Join(dir, "libvirtd.log"))
		t.Fatalf("%v\n%s", err, b)
	}
	defer d.Stop()
	root, _ := filepath.Abs("../../..")
	if err := d.ImportVolume(filepath.Join(root, "bin", "guest", "guest.qcow2"), "guest.qcow2"); err != nil {
		t.Fatal(err)
	}
	c, err := Connect(ctx, providers.Connection{Endpoint: fmt.Sprintf("qemu+tls://127.0.0.1:%d/system", port), CABundle: ca.pem,
		Credentials: providers.Credentials{ClientCertificate: clientCert, ClientKey: clientKey}}, Options{DomainType: "qemu"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	spec := providers.MachineSpec{Name: "console-tls", HostName: "console-tls", InstanceUUID: "9b0e8a52-1f0c-4d1e-9a55-3c2b7d6e0f41",
		Image: image, CPUs: 1, MemoryMiB: 256, Disks: []providers.Disk{{Name: "root", SizeGiB: 1}}, PowerState: v1alpha1.PowerStatePoweredOn}
	if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.DeleteMachine(context.Background(), spec, (&recorder{}).record) }()
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(d.SerialLog(spec.Name), "BANLIEUE-READY") {
		if time.Now().After(deadline) {
			t.Fatalf("no BANLIEUE-READY on the serial console:\n%s", d.SerialLog(spec.Name))
		}
		time.Sleep(500 * time.Millisecond)
	}

	s, err := c.OpenConsole(ctx, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if _, err := fmt.Fprintf(s, "echo TLS%s$((6*7))\n", "C0NS0LE"); err != nil {
		t.Fatal(err)
	}
	// Read until the shell's answer: the typed line echoes back as
	// "TLSC0NS0LE$((6*7))", only the shell prints TLSC0NS0LE42.
	got := make(chan string, 1)
	go func() {
		var out bytes.Buffer
		b := make([]byte, 4096)
		for !strings.Contains(out.String(), "TLSC0NS0LE42") {
			n, err := s.Read(b)
			out.Write(b[:n])
			if err != nil {
				break
			}
		}
		got <- out.String()
	}()
	select {
	case out := <-got:
		if !strings.Contains(out, "TLSC0NS0LE42") {
			t.Errorf("the console ended before the shell's answer: %q", out)
		}
	case <-time.After(30 * time.Second):
		_ = s.Close() // ends the reader
		t.Errorf("no answer from the guest's shell in 30 s: %q", <-got)
	}

	other := spec
	other.Name, other.InstanceUUID = "console-none", "0d1c2b3a-4f5e-4a6b-8c7d-9e0f1a2b3c4d"
	if s2, err := c.OpenConsole(ctx, other, false); !errors.Is(err, providers.ErrNoConsole) {
		if s2 != nil {
			_ = s2.Close()
		}
		t.Errorf("console of a domain the host does not have: %v, want ErrNoConsole", err)
	}
}
