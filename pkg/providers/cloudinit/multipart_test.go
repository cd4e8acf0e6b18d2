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

package cloudinit

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"testing"
)

func TestMultipart(t *testing.T) {
	one := []byte("#cloud-config\nruncmd: [echo one]\n")
	if got, err := Multipart(nil, one, []byte{}); err != nil || !bytes.Equal(got, one) {
		t.Errorf("a single document: %q, %v; want it unchanged", got, err)
	}
	if got, err := Multipart(); got != nil || err != nil {
		t.Errorf("no documents: %q, %v", got, err)
	}
	script := []byte("#!/bin/sh\necho two\n")
	got, err := Multipart(one, script)
	if err != nil {
		t.Fatal(err)
	}
	// Read back as a mail reader would (cloud-init uses Python's email).
	msg, err := mail.ReadMessage(bytes.NewReader(got))
	if err != nil {
		t.Fatal(err)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/mixed" {
		t.Fatalf("content type %q: %v", mt, err)
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	var types []string
	var bodies [][]byte
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(p)
		pt, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		types, bodies = append(types, pt), append(bodies, body)
	}
	if len(types) != 2 || types[0] != "text/cloud-config" || types[1] != "text/x-shellscript" ||
		!bytes.Equal(bodies[0], one) || !bytes.Equal(bodies[1], script) {
		t.Errorf("parts %v: %q", types, bodies)
	}
	if _, err := Multipart(one, got); err == nil {
		t.Error("a MIME document was nested")
	}
}
