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
	"encoding/binary"
	"io"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/firestoned/banlieue/pkg/providers"
)

// rpcPacket is one packet as libvirt's wire carries it.
func rpcPacket(program, procedure, typ uint32, payload []byte) []byte {
	var b bytes.Buffer
	for _, v := range []uint32{uint32(rpcHeaderLen + len(payload)), program, 1, procedure, typ, 7, 0} {
		_ = binary.Write(&b, binary.BigEndian, v)
	}
	b.Write(payload)
	return b.Bytes()
}

func libvirtCalls(method string) func() float64 {
	c := providers.BackendRequests.WithLabelValues("libvirt", method)
	before := testutil.ToFloat64(c)
	return func() float64 { return testutil.ToFloat64(c) - before }
}

// TestRPCsCountedOffTheWire: each call is counted once by its procedure's
// name however the writes split the packets; replies, stream data and a
// payload that looks like a call header are not calls.
func TestRPCsCountedOffTheWire(t *testing.T) {
	decoy := rpcPacket(remoteProgram, 9, rpcCall, nil) // a call's header, inside a payload
	var wire []byte
	wire = append(wire, rpcPacket(remoteProgram, 9, rpcCall, []byte("domain"))...)      // DomainCreate
	wire = append(wire, rpcPacket(remoteProgram, 9, 1, nil)...)                         // a reply: not a call
	wire = append(wire, rpcPacket(remoteProgram, 208, 3, append(decoy, decoy...))...)   // stream data carrying decoys
	wire = append(wire, rpcPacket(qemuProgram, 1, rpcCall, []byte("{\"execute\"}"))...) // QEMU monitor command
	for _, chunk := range []int{len(wire), 1, 5, 29} {
		t.Run("", func(t *testing.T) {
			create, qemu, stream := libvirtCalls("DomainCreate"), libvirtCalls("QEMUProcedure1"), libvirtCalls("StorageVolUpload")
			local, remote := net.Pipe()
			go func() { _, _ = io.Copy(io.Discard, remote) }()
			defer local.Close()
			c := countRPCs(local)
			for rest := wire; len(rest) > 0; {
				k := min(chunk, len(rest))
				if _, err := c.Write(rest[:k]); err != nil {
					t.Fatal(err)
				}
				rest = rest[k:]
			}
			if create() != 1 || qemu() != 1 || stream() != 0 {
				t.Errorf("written in chunks of %d: DomainCreate %v, QEMUProcedure1 %v, StorageVolUpload %v; want 1, 1, 0", chunk, create(), qemu(), stream())
			}
		})
	}
}

// TestRPCsCountedOnARealDaemon: the session's own calls to libvirtd
// (opening the connection, reading the host's name) are counted.
func TestRPCsCountedOnARealDaemon(t *testing.T) {
	opened := libvirtCalls("ConnectOpen")
	connect(t)
	if opened() < 1 {
		t.Errorf("ConnectOpen counted %v times after a connection was opened, want 1 or more", opened())
	}
}
