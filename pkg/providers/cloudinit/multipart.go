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
	"fmt"
	"mime/multipart"
	"net/textproto"
	"strings"
)

// Multipart joins cloud-init user data documents into one MIME multipart
// message, in order (cloud-init merges cloud-config parts in order, so a
// later one's keys win). Each part's type comes from its first line, as
// cloud-init reads an undeclared part. One document is returned as it is.
func Multipart(docs ...[]byte) ([]byte, error) {
	var parts [][]byte
	for _, d := range docs {
		if len(d) > 0 {
			parts = append(parts, d)
		}
	}
	switch len(parts) {
	case 0:
		return nil, nil
	case 1:
		return parts[0], nil
	}
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=%q\r\nMIME-Version: 1.0\r\n\r\n", w.Boundary())
	for i, p := range parts {
		if isMIME(p) {
			return nil, fmt.Errorf("document %d is already MIME: cloud-init does not nest it", i)
		}
		h := textproto.MIMEHeader{}
		h.Set("Content-Type", partType(p)+`; charset="utf-8"`)
		h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="part-%03d"`, i))
		pw, err := w.CreatePart(h)
		if err != nil {
			return nil, err
		}
		if _, err := pw.Write(p); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// partType is cloud-init's MIME type for a document by its first line.
func partType(doc []byte) string {
	first, _, _ := strings.Cut(string(doc), "\n")
	for prefix, t := range map[string]string{
		"#cloud-config":      "text/cloud-config",
		"#!":                 "text/x-shellscript",
		"#cloud-boothook":    "text/cloud-boothook",
		"#include":           "text/x-include-url",
		"#part-handler":      "text/part-handler",
		"## template: jinja": "text/jinja2",
	} {
		if strings.HasPrefix(first, prefix) {
			return t
		}
	}
	return "text/plain"
}

func isMIME(doc []byte) bool {
	return bytes.HasPrefix(bytes.TrimSpace(doc), []byte("Content-Type:"))
}
