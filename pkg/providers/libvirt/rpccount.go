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
	"encoding/binary"
	"net"
	"strconv"
	"sync"

	"github.com/firestoned/banlieue/pkg/providers"
)

// The RPC header as libvirt's wire carries it, after the packet's length:
// program, version, procedure, type, serial, status (4 bytes each).
const (
	rpcHeaderLen = 28
	// remoteProgram and qemuProgram are libvirt's REMOTE_PROGRAM and
	// QEMU_PROGRAM; rpcCall is VIR_NET_CALL, a client's call.
	remoteProgram = 0x20008086
	qemuProgram   = 0x20008087
	rpcCall       = 0
)

// rpcCounting counts the remote procedure calls written to a libvirt
// connection (banlieue_provider_backend_requests_total{backend="libvirt"})
// by procedure, read off the wire: every call go-libvirt makes, whichever
// method made it, and only calls (replies, stream data and events are not
// requests). libvirtd keeps no such count of its own.
type rpcCounting struct {
	net.Conn
	mu sync.Mutex
	// head is the current packet's header read so far; body the bytes of
	// its payload still to pass over.
	head []byte
	body uint32
}

func countRPCs(c net.Conn) net.Conn {
	return &rpcCounting{Conn: c, head: make([]byte, 0, rpcHeaderLen)}
}

func (c *rpcCounting) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.scan(p[:n])
	c.mu.Unlock()
	return n, err
}

// scan follows the packets in p, however the writes split them, and
// counts each call once its header is complete.
func (c *rpcCounting) scan(p []byte) {
	for len(p) > 0 {
		if c.body > 0 {
			k := min(uint32(len(p)), c.body)
			c.body -= k
			p = p[k:]
			continue
		}
		k := min(rpcHeaderLen-len(c.head), len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
		if len(c.head) < rpcHeaderLen {
			return
		}
		be := binary.BigEndian
		length, program, procedure, typ := be.Uint32(c.head[0:]), be.Uint32(c.head[4:]), be.Uint32(c.head[12:]), be.Uint32(c.head[16:])
		if typ == rpcCall {
			providers.BackendRequests.WithLabelValues("libvirt", procedureName(program, procedure)).Inc()
		}
		c.body = max(length, rpcHeaderLen) - rpcHeaderLen
		c.head = c.head[:0]
	}
}

// procedureName names a call as libvirt does, without its REMOTE_PROC_
// prefix (DomainDefineXMLFlags); a QEMU-program call or an unknown number
// by its number.
func procedureName(program, procedure uint32) string {
	if name, ok := procedures[procedure]; ok && program == remoteProgram {
		return name
	}
	prefix := "Procedure"
	if program == qemuProgram {
		prefix = "QEMUProcedure"
	}
	return prefix + strconv.FormatUint(uint64(procedure), 10)
}
