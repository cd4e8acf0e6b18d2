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

import (
	"crypto/hmac"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// authTicketLifetime is how long a login ticket lasts (AccessControl.pm
// $ticket_lifetime, 2 h); the CSRF token is checked over the same span.
const authTicketLifetime = 2 * time.Hour

// login is POST /access/ticket: a user's password (or a valid ticket of
// it, which is how clients renew one) for a ticket
// (PVE:USER:HEXTIME::SIGNATURE) and its CSRFPreventionToken
// (HEXTIME:SIGNATURE). Wrong credentials are a 401 that names nothing.
func (s *Simulator) login(p params) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := p["username"]
	if realm := p["realm"]; realm != "" && !strings.Contains(name, "@") {
		name += "@" + realm
	}
	u := s.users[name]
	if u == nil || (p["password"] != u.Password && s.ticketUser(p["password"]) != u) {
		return nil, fail(http.StatusUnauthorized, "authentication failure")
	}
	stamp := fmt.Sprintf("%08X", time.Now().Unix())
	return map[string]any{
		"username":            u.ID,
		"ticket":              "PVE:" + u.ID + ":" + stamp + "::" + s.sign("PVE:"+u.ID+":"+stamp),
		"CSRFPreventionToken": stamp + ":" + s.sign("CSRF:"+stamp+":"+u.ID),
		// The per-area privileges the GUI reads; the simulator lists
		// the user's granted privileges under "vms" only.
		"cap": map[string]map[string]int{"vms": s.capOf(u)},
	}, nil
}

// ticketUser is the user a login ticket is for, nil when it is not one
// of the simulator's or expired.
func (s *Simulator) ticketUser(ticket string) *User {
	rest, ok := strings.CutPrefix(ticket, "PVE:")
	if !ok {
		return nil
	}
	head, sig, ok := strings.Cut(rest, "::")
	i := strings.LastIndex(head, ":")
	if !ok || i < 0 || !hmac.Equal([]byte(sig), []byte(s.sign("PVE:"+head))) || !fresh(head[i+1:]) {
		return nil
	}
	return s.users[head[:i]]
}

// validCSRF checks a CSRFPreventionToken against the ticket's user.
func (s *Simulator) validCSRF(user, token string) bool {
	stamp, sig, ok := strings.Cut(token, ":")
	return ok && fresh(stamp) && hmac.Equal([]byte(sig), []byte(s.sign("CSRF:"+stamp+":"+user)))
}

// fresh: a hex timestamp within a login ticket's lifetime.
func fresh(stamp string) bool {
	t, err := strconv.ParseInt(stamp, 16, 64)
	if err != nil {
		return false
	}
	age := time.Since(time.Unix(t, 0))
	return age >= -5*time.Minute && age <= authTicketLifetime
}

func (s *Simulator) capOf(u *User) map[string]int {
	out := map[string]int{}
	for _, a := range u.ACL {
		for _, p := range a.Privileges {
			out[p] = 1
		}
	}
	return out
}

// AddUser adds (or replaces) a user that logs in with a password.
func (s *Simulator) AddUser(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[u.ID] = &u
}
