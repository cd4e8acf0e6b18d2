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

// Package redact takes what names a backend out of a message bound for a
// place tenants read (machine conditions, Events, VMImage and Provider
// status): endpoints, host names with ports, IP addresses and user names.
// A backend's raw error says where its vCenter or Proxmox cluster is and
// as whom banlieue logs in; the provider's log, which only its operators
// read, keeps the whole text.
package redact

import "regexp"

// Placeholders put where something was taken out.
const (
	Endpoint = "<endpoint>"
	Address  = "<address>"
	User     = "<user>"
)

var rules = []struct {
	re   *regexp.Regexp
	with string
}{
	// scheme://anything up to a space or a quote: https://vc:443/sdk,
	// qemu+tls://host/system, qemu+unix:///system?socket=... (not the
	// punctuation after it).
	{regexp.MustCompile(`\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]*[^\s"'<>:,.;)]`), Endpoint},
	// user@domain and Proxmox token ids user@realm!token.
	{regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+(?:![A-Za-z0-9._-]+)?`), User},
	// [v6]:port and bare v6 addresses of at least three groups.
	// (a colon inside: spec.disks[0] is a field path).
	{regexp.MustCompile(`\[[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*\](?::\d+)?`), Address},
	{regexp.MustCompile(`\b(?:[0-9A-Fa-f]{1,4}:){2,7}[0-9A-Fa-f]{1,4}\b`), Address},
	// v4 with an optional port.
	{regexp.MustCompile(`\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b`), Address},
	// host.domain:port and localhost:port.
	{regexp.MustCompile(`\b(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}:\d+\b|\blocalhost:\d+\b`), Address},
}

// formatHint is a capitalised placeholder that says what a value should
// look like (USER@REALM!TOKENID), not a user: kept.
var formatHint = regexp.MustCompile(`^[A-Z]+@[A-Z]+(?:![A-Z]+)?$`)

// Message is msg with endpoints, addresses and user names replaced by
// placeholders.
func Message(msg string) string {
	for _, r := range rules {
		msg = r.re.ReplaceAllStringFunc(msg, func(m string) string {
			if r.with == User && formatHint.MatchString(m) {
				return m
			}
			return r.with
		})
	}
	return msg
}
