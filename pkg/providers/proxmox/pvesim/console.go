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
package pvesim

// A VM's serial console as Proxmox VE serves it (qemu-server 9.2's
// PVE/API2/Qemu.pm termproxy and vncwebsocket, PVE/CLI/qm.pm terminal,
// pve-access-control's AccessControl.pm VNC tickets; read in their git
// trees):
//
//   - POST /nodes/N/qemu/V/termproxy (VM.Console on /vms/V, optional
//     serial=serial0..3) starts a worker task "vncproxy" that runs
//     termproxy on a free port 5900-5999 in front of
//     "qm terminal V -escape 0 [-iface serialN]", and answers {user, ticket,
//     port, upid}. It checks neither that the VM runs nor that it has a
//     serial port: qm terminal does, once a client is attached, and prints
//     its error to that client before the connection closes.
//   - The ticket is a VNC ticket (PVEVNC:HEXTIME::SIGNATURE) signed over
//     "authid:/vms/V:port", valid from 20 s before to 40 s after it was made
//     (verify_rsa_ticket(..., -20, 40)); a bad one is a 401 "permission
//     denied - invalid PVEVNC ticket" (pve-common's PVE/Ticket.pm).
//   - GET /nodes/N/qemu/V/vncwebsocket?port=P&vncticket=T (VM.Console;
//     the ticket verified for the caller, the path and the port) is
//     upgraded to a websocket (subprotocol "binary") joined to termproxy's
//     port. termproxy accepts one client: its first message is
//     "AUTHID:TICKET\n", answered "OK"; then "0:LEN:DATA" is input,
//     "1:COLS:ROWS:" a resize, "2" a ping (ignored); output comes back as
//     raw bytes. termproxy (pve-xtermjs termproxy/src/main.rs) waits 10 s
//     for its client ("failed waiting for client: timed out"; go-proxmox#221
//     says 30 s, the source 10) and 10 s for the ticket line, checks it
//     with the API daemon (exiting on a refusal), writes "OK", then runs
//     the command on a pty; it serves one client and exits: a ticket
//     serves once. Its "OK" and the first output may reach the client in
//     one websocket message (pveproxy relays a byte stream); the
//     simulator sends them apart.
//   - qm terminal connects to the VM's /var/run/qemu-server/V.serialN
//     socket (serialN: socket in the config). QEMU's socket chardev serves
//     one client at a time and stops accepting while it has one
//     (char-socket.c tcp_chr_new_client): a second terminal is not refused
//     and does not take over; it is connected but hears nothing until the
//     first one leaves. The simulator queues it the same way.
//
// API tokens: until qemu-server 9.1.7 (April 2026) termproxy checked the
// client's ticket through /access/ticket, whose user name check refuses
// USER@REALM!TOKENID: the websocket opens, the handshake is closed without
// "OK" (go-proxmox#221). qemu-server 9.1.7 passes --vncticket-endpoint, so
// termproxy asks /access/vncticket, which takes tokens since
// pve-access-control 9.0.4 (commit fc367b3, "allow token-owned VNC ticket
// verification"). Which pve-manager release first shipped both is not
// recorded in those trees: the simulator accepts tokens from 9.2 on, an
// assumption. Also not verified, and not simulated: termproxy's idle
// timeout when pings stop, and whether pveproxy refuses an upgrade without
// the "binary" subprotocol or closes it at once (the simulator closes it).

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math/big"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// VNC ticket validity (AccessControl.pm verify_short_lived_ticket) and how
// long termproxy waits for its client, then for the ticket line.
const (
	vncTicketMinAge = -20 * time.Second
	vncTicketMaxAge = 40 * time.Second
	termproxyWait   = 10 * time.Second
)

// termproxy is one termproxy process: its port, whom its ticket is for,
// its worker task.
type termproxy struct {
	port   int
	vmid   int
	node   string
	authid string
	iface  string // -iface, "" for the first socket serial
	task   *task
	// claimed: a client connected (termproxy serves one).
	claimed bool
	// exit is the task's exit status once it ends.
	exit string
}

// serialPort is a running VM's serial socket: one client at a time,
// others wait in line (QEMU's listener is off while it has a client).
type serialPort struct {
	mu sync.Mutex
	// free holds a token while no client is attached.
	free chan struct{}
	// gone is closed when the VM stops (QEMU exits, the socket goes).
	gone chan struct{}
}

// serialPortOf is VM vmid's socket for iface, made at its first use;
// callers hold s.mu.
func (s *Simulator) serialPortOf(vmid int, iface string) *serialPort {
	key := fmt.Sprintf("%d/%s", vmid, iface)
	if p := s.serials[key]; p != nil {
		return p
	}
	p := &serialPort{free: make(chan struct{}, 1), gone: make(chan struct{})}
	p.free <- struct{}{}
	s.serials[key] = p
	return p
}

// dropSerials closes VM vmid's serial sockets (it stopped): attached and
// waiting terminals end.
func (s *Simulator) dropSerials(vmid int) {
	prefix := fmt.Sprintf("%d/", vmid)
	for key, p := range s.serials {
		if strings.HasPrefix(key, prefix) {
			close(p.gone)
			delete(s.serials, key)
		}
	}
}

// vncTicket signs "authid:path:port" with the time it was made.
func (s *Simulator) vncTicket(authid, path string, port int, at time.Time) string {
	stamp := fmt.Sprintf("%08X", at.Unix())
	return "PVEVNC:" + stamp + "::" + s.sign("PVEVNC:"+stamp+":"+authid+":"+path+":"+strconv.Itoa(port))
}

// verifyVNCTicket is verify_vnc_ticket: the signature for authid, path and
// port, made between 40 s ago and 20 s ahead.
func (s *Simulator) verifyVNCTicket(ticket, authid, path string, port int) bool {
	rest, ok := strings.CutPrefix(ticket, "PVEVNC:")
	if !ok {
		return false
	}
	stamp, sig, ok := strings.Cut(rest, "::")
	if !ok || !hmac.Equal([]byte(sig), []byte(s.sign("PVEVNC:"+stamp+":"+authid+":"+path+":"+strconv.Itoa(port)))) {
		return false
	}
	t, err := strconv.ParseInt(stamp, 16, 64)
	if err != nil {
		return false
	}
	age := time.Since(time.Unix(t, 0)).Truncate(time.Second)
	return age > vncTicketMinAge && age < vncTicketMaxAge
}

// sign is the simulator's stand-in for PVE's RSA ticket signature.
func (s *Simulator) sign(data string) string {
	m := hmac.New(sha256.New, s.ticketKey)
	m.Write([]byte(data))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

var serialRe = regexp.MustCompile(`^serial[0-3]$`)

// startTermproxy is POST termproxy: a vncproxy task holding a port, and
// the ticket for it.
func (s *Simulator) startTermproxy(v *vm, p params) (any, *apiError) {
	iface := p["serial"]
	if iface != "" && !serialRe.MatchString(iface) {
		return nil, badParam("serial", "value '"+iface+"' does not have a value in the enumeration 'serial0, serial1, serial2, serial3'")
	}
	if iface == "" {
		// Without serial, a VM whose display is a serial port (vga:
		// serialN) gets that one; else qm terminal picks the first.
		if vga, _ := v.config["vga"].(string); vga != "" {
			if typ, _, _ := strings.Cut(strings.TrimPrefix(vga, "type="), ","); serialRe.MatchString(typ) {
				iface = typ
			}
		}
	}
	port := 0
	for p := 5900; p <= 5999; p++ {
		if s.terms[p] == nil {
			port = p
			break
		}
	}
	if port == 0 {
		return nil, fail(http.StatusInternalServerError, "unable to find free port (5900-5999)")
	}
	authid := s.callerID()
	t := s.startTask(v.node, "vncproxy", strconv.Itoa(v.vmid), nil)
	tk := s.tasks[t]
	// The worker runs as long as termproxy: it ends when work is closed.
	tk.user = authid
	tk.work = make(chan struct{})
	tp := &termproxy{port: port, vmid: v.vmid, node: v.node, authid: authid, iface: iface, task: tk}
	tk.effect = func() string { return tp.exit }
	s.terms[port] = tp
	time.AfterFunc(termproxyWait, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !tp.claimed {
			s.endTermproxy(tp, "failed waiting for client: timed out")
		}
	})
	return map[string]any{
		"user": authid, "ticket": s.vncTicket(authid, vmPath(v.vmid), port, time.Now()), "upid": t,
		// The schema says integer; the one recording of a VM's termproxy
		// (go-proxmox pve9x mocks) has a string, which go-proxmox's
		// StringOrInt reads either way.
		"port": strconv.Itoa(port),
	}, nil
}

// endTermproxy ends a termproxy's task with exit ("" is OK) and frees its
// port; callers hold s.mu.
func (s *Simulator) endTermproxy(tp *termproxy, exit string) {
	if s.terms[tp.port] != tp {
		return
	}
	delete(s.terms, tp.port)
	tp.exit = exit
	close(tp.task.work)
}

// vncWebsocket serves GET vncwebsocket: the checks of the API call, then
// (when the client asks for an upgrade) termproxy's side of the socket. It
// runs outside s.mu, which it takes only for its checks: a session lasts.
func (s *Simulator) vncWebsocket(w http.ResponseWriter, r *http.Request, who *identity, node string, vmid int, p params) {
	s.mu.Lock()
	tp, aerr := s.vncwebsocketCheck(who, node, vmid, p)
	s.requests["GET vncwebsocket"]++
	s.mu.Unlock()
	if aerr != nil {
		write(w, nil, aerr)
		return
	}
	if !websocket.IsWebSocketUpgrade(r) {
		// The API call itself answers the port (a string, as its
		// schema says); pveproxy runs it before joining the socket.
		write(w, map[string]any{"port": strconv.Itoa(tp.port)}, nil)
		return
	}
	up := websocket.Upgrader{Subprotocols: []string{"binary"}, CheckOrigin: func(*http.Request) bool { return true }}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	if conn.Subprotocol() != "binary" {
		return
	}
	s.mu.Lock()
	if tp.claimed || s.terms[tp.port] != tp {
		// termproxy took its one client, or gave up: nothing listens.
		s.mu.Unlock()
		return
	}
	tp.claimed = true
	s.mu.Unlock()
	exit := s.termproxySession(conn, tp)
	s.mu.Lock()
	s.endTermproxy(tp, exit)
	s.mu.Unlock()
}

// vncwebsocketCheck is the API call's part: the VM, VM.Console, the
// ticket for the caller, the path and the port, and a termproxy there.
func (s *Simulator) vncwebsocketCheck(who *identity, nodeName string, vmid int, p params) (*termproxy, *apiError) {
	s.caller = who
	defer func() { s.caller = nil }()
	s.tick(time.Now())
	n, aerr := s.onlineNode(nodeName)
	if aerr != nil {
		return nil, aerr
	}
	port, err := strconv.Atoi(p["port"])
	if err != nil || port < 5900 || port > 5999 {
		return nil, badParam("port", "value must have a minimum value of 5900 and a maximum value of 5999")
	}
	if t := p["vncticket"]; t == "" || len(t) > 512 {
		return nil, badParam("vncticket", "value may not be empty and at most 512 characters")
	}
	v, ok := s.vms[vmid]
	if !ok || v.node != n.name {
		return nil, fail(http.StatusInternalServerError, "Configuration file 'nodes/%s/qemu-server/%d.conf' does not exist", n.name, vmid)
	}
	if err := s.need(vmPath(vmid), "VM.Console"); err != nil {
		return nil, err
	}
	if !s.verifyVNCTicket(p["vncticket"], who.id, vmPath(vmid), port) {
		// pve-common's PVE::Ticket::verify_rsa_ticket raises it with 401.
		return nil, fail(http.StatusUnauthorized, "permission denied - invalid PVEVNC ticket")
	}
	tp := s.terms[port]
	if tp == nil || tp.vmid != vmid {
		// Nothing (of this VM) listens there: pveproxy cannot connect.
		// What it answers then is not verified; the simulator says 500.
		return nil, fail(http.StatusInternalServerError, "unable to connect to VNC server on port %d", port)
	}
	return tp, nil
}

// termproxySession is termproxy with its client: the handshake, then qm
// terminal. It returns the task's exit status.
func (s *Simulator) termproxySession(conn *websocket.Conn, tp *termproxy) string {
	_ = conn.SetReadDeadline(time.Now().Add(termproxyWait))
	_, msg, err := conn.ReadMessage()
	if err != nil {
		return "failed reading ticket: timed out"
	}
	user, ticket, _ := strings.Cut(strings.TrimSuffix(string(msg), "\n"), ":")
	s.mu.Lock()
	ok := user == tp.authid && s.verifyVNCTicket(ticket, user, vmPath(tp.vmid), tp.port) &&
		(!strings.Contains(user, "!") || s.tokensAtTermproxy())
	s.mu.Unlock()
	if !ok {
		// termproxy exits without a word; the client reads EOF.
		return "invalid authentication - 401 authentication failure"
	}
	_ = conn.SetReadDeadline(time.Time{})
	if err := conn.WriteMessage(websocket.BinaryMessage, []byte("OK")); err != nil {
		return ""
	}
	s.qmTerminal(conn, tp)
	return ""
}

// tokensAtTermproxy: the release's termproxy takes token-owned tickets
// (see the top of this file: assumed from 9.2 on).
func (s *Simulator) tokensAtTermproxy() bool {
	major, rest, _ := strings.Cut(s.opts.Version, ".")
	minor, _, _ := strings.Cut(rest, ".")
	ma, _ := strconv.Atoi(major)
	mi, _ := strconv.Atoi(minor)
	return ma > 9 || ma == 9 && mi >= 2
}

// qmTerminal is "qm terminal VMID -escape 0 [-iface IFACE]" on termproxy's
// terminal: its checks, printed to the client, then the serial socket.
func (s *Simulator) qmTerminal(conn *websocket.Conn, tp *termproxy) {
	s.mu.Lock()
	v := s.vms[tp.vmid]
	var port *serialPort
	var refusal string
	iface := tp.iface
	switch {
	case v == nil:
		refusal = fmt.Sprintf("Configuration file 'nodes/%s/qemu-server/%d.conf' does not exist", tp.node, tp.vmid)
	case iface != "" && v.config[iface] == nil:
		refusal = fmt.Sprintf("serial interface '%s' is not configured", iface)
	case iface != "" && v.config[iface] != "socket":
		refusal = fmt.Sprintf("wrong serial type on interface '%s'", iface)
	}
	if refusal == "" && iface == "" {
		for _, k := range []string{"serial0", "serial1", "serial2", "serial3"} {
			if v.config[k] == "socket" {
				iface = k
				break
			}
		}
		if iface == "" {
			refusal = "unable to find a serial interface"
		}
	}
	if refusal == "" && v.status != "running" {
		refusal = fmt.Sprintf("VM %d not running", tp.vmid)
	}
	if refusal == "" {
		port = s.serialPortOf(tp.vmid, iface)
	}
	s.mu.Unlock()
	if refusal != "" {
		_ = conn.WriteMessage(websocket.BinaryMessage, []byte(refusal+"\r\n"))
		return
	}
	// -escape 0: no "(press Ctrl+O to exit)".
	if err := conn.WriteMessage(websocket.BinaryMessage, []byte("starting serial terminal on interface "+iface+"\r\n")); err != nil {
		return
	}
	in := make(chan []byte, 16)
	clientGone, done := make(chan struct{}), make(chan struct{})
	defer close(done)
	// The reader ends with the connection, which the caller closes.
	go func() {
		defer close(clientGone)
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			for _, data := range termproxyInput(msg) {
				select {
				case in <- data:
				case <-done:
					return
				}
			}
		}
	}()
	// Wait in line for the socket, as socat does behind QEMU's listener.
	select {
	case <-port.free:
	case <-port.gone:
		return
	case <-clientGone:
		return
	}
	defer func() { port.free <- struct{}{} }()
	sh := &standInShell{vmid: tp.vmid, iface: iface}
	out := func(b []byte) error { return conn.WriteMessage(websocket.BinaryMessage, b) }
	if out(sh.banner()) != nil {
		return
	}
	for {
		select {
		case data := <-in:
			if out(sh.input(data)) != nil {
				return
			}
		case <-port.gone:
			// QEMU exited: socat, qm terminal and termproxy end.
			return
		case <-clientGone:
			return
		}
	}
}

// termproxyInput parses a client message: "0:LEN:DATA" frames (LEN bytes
// of input; several may follow one another), "1:COLS:ROWS:" resizes and
// "2" pings, which a serial line ignores; anything else is dropped, as
// termproxy does. It returns the input bytes. (termproxy parses a byte
// stream across messages; the simulator only within one.)
func termproxyInput(msg []byte) [][]byte {
	var out [][]byte
	for len(msg) > 0 {
		switch msg[0] {
		case '0':
			parts := strings.SplitN(string(msg), ":", 3)
			if len(parts) < 3 {
				return out
			}
			n, err := strconv.Atoi(parts[1])
			data := msg[len(parts[0])+len(parts[1])+2:]
			if err != nil || n < 0 || n > len(data) {
				return out
			}
			out = append(out, data[:n])
			msg = data[n:]
		case '1':
			parts := strings.SplitN(string(msg), ":", 4)
			if len(parts) < 4 {
				return out
			}
			msg = msg[len(parts[0])+len(parts[1])+len(parts[2])+3:]
		case '2':
			msg = msg[1:]
		default:
			return out
		}
	}
	return out
}

// standInShell is what the simulator puts behind a serial port, where a
// real VM has its guest's getty: a line-based shell that answers "echo"
// (with $((A OP B)) expanded) and says it is a stand-in. It echoes what it
// is sent, as a guest's terminal line discipline does.
type standInShell struct {
	vmid  int
	iface string
	line  []byte
}

func (sh *standInShell) banner() []byte {
	return []byte(fmt.Sprintf("pvesim stand-in shell on %s of VM %d: no guest runs in the simulator; it answers echo.\r\n$ ", sh.iface, sh.vmid))
}

func (sh *standInShell) input(data []byte) []byte {
	var out []byte
	for _, b := range data {
		switch b {
		case '\r', '\n':
			out = append(out, '\r', '\n')
			out = append(out, sh.run(string(sh.line))...)
			out = append(out, '$', ' ')
			sh.line = sh.line[:0]
		case 0x7f, 0x08:
			if len(sh.line) > 0 {
				sh.line = sh.line[:len(sh.line)-1]
				out = append(out, '\b', ' ', '\b')
			}
		default:
			sh.line = append(sh.line, b)
			out = append(out, b)
		}
	}
	return out
}

func (sh *standInShell) run(line string) []byte {
	fields := strings.Fields(line)
	switch {
	case len(fields) == 0:
		return nil
	case fields[0] == "echo":
		return []byte(expand(strings.Join(fields[1:], " ")) + "\r\n")
	}
	return []byte("sh: " + fields[0] + ": not found (pvesim stand-in shell)\r\n")
}

var arith = regexp.MustCompile(`\$\(\(\s*(-?\d+)\s*([-+*/%])\s*(-?\d+)\s*\)\)`)

// expand is the shell's arithmetic expansion of $((A OP B)), in integers.
func expand(s string) string {
	return arith.ReplaceAllStringFunc(s, func(m string) string {
		g := arith.FindStringSubmatch(m)
		a, _ := new(big.Int).SetString(g[1], 10)
		b, _ := new(big.Int).SetString(g[3], 10)
		r := new(big.Int)
		switch g[2] {
		case "+":
			r.Add(a, b)
		case "-":
			r.Sub(a, b)
		case "*":
			r.Mul(a, b)
		case "/", "%":
			if b.Sign() == 0 {
				return "sh: division by zero"
			}
			if g[2] == "/" {
				r.Quo(a, b)
			} else {
				r.Rem(a, b)
			}
		}
		return r.String()
	})
}
