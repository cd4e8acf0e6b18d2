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

package runbook

import (
	"reflect"
	"strings"
	"testing"
)

const guide = "# A guide\n" + // 1
	"\n" + // 2
	"```sh\n" + // 3
	"# a remark\n" + // 4
	"kubectl create secret generic s \\\n" + // 5
	"  --from-literal=a=b\n" + // 6
	"\n" + // 7
	"kubectl get s\n" + // 8
	"```\n" + // 9
	"\n" + // 10
	"```text\n" + // 11
	"NAME   TYPE\n" + // 12
	"s      ...\n" + // 13
	"```\n" + // 14
	"```yaml\n" + // 15
	"# provider.yaml\n" + // 16
	"kind: Provider\n" + // 17
	"```\n" + // 18
	"```yaml\n" + // 19
	"kind: Example\n" + // 20
	"```\n"

func TestParse(t *testing.T) {
	got, err := Parse(guide)
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{Kind: Command, Text: "kubectl create secret generic s --from-literal=a=b", Line: 5},
		{Kind: Command, Text: "kubectl get s", Line: 8},
		{Kind: Output, Text: "NAME   TYPE\ns      ...", Line: 11},
		{Kind: File, Name: "provider.yaml", Text: "kind: Provider\n", Line: 15},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("steps\n%+v\nwant\n%+v", got, want)
	}
}

func TestParseRefuses(t *testing.T) {
	for name, md := range map[string]string{
		"output first": "```text\nx\n```\n",
		"unclosed":     "```sh\nls\n",
		"after a file": "```yaml\n# a.yaml\nx: 1\n```\n```text\nx\n```\n",
	} {
		if _, err := Parse(md); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// TestMatch: columns padded differently match, "..." matches the rest of
// a line; a different value, a missing or extra field or line does not.
func TestMatch(t *testing.T) {
	want := "NAME           CLASS     READY   AGE\nprod-vsphere   vsphere   True    ..."
	for got, ok := range map[string]bool{
		"NAME CLASS READY AGE\nprod-vsphere vsphere True 5s\n":       true,
		"NAME CLASS READY AGE\nprod-vsphere vsphere True 5s extra\n": true,
		"NAME CLASS READY AGE\nprod-vsphere vsphere False 5s\n":      false,
		"NAME CLASS READY\nprod-vsphere vsphere True 5s\n":           false,
		"NAME CLASS READY AGE EXTRA\nprod-vsphere vsphere True 5s\n": false,
		"NAME CLASS READY AGE\nprod-vsphere vsphere\n":               false,
		"NAME CLASS READY AGE\n":                                     false,
		"NAME CLASS READY AGE\nprod-vsphere vsphere True 5s\nmore\n": false,
		"": false,
	} {
		if d := Match(want, got); (d == "") != ok {
			t.Errorf("Match(%q): %q, want a match %t", strings.ReplaceAll(got, "\n", `\n`), d, ok)
		}
	}
}

// TestFollow: files are written where the commands run, an output that
// matches passes, one that differs is reported with its line, and a
// failing command stops the run with its error output.
func TestFollow(t *testing.T) {
	dir := t.TempDir()
	steps, err := Parse("```yaml\n# a.txt\nhello\n```\n```sh\ncat a.txt\n```\n```text\nhello\n```\n```sh\necho $GREETING\n```\n```text\nbye\n```\n")
	if err != nil {
		t.Fatal(err)
	}
	err = Follow(steps, dir, []string{"GREETING=hi"}, t.Logf)
	if err == nil || !strings.Contains(err.Error(), "line 14:") || strings.Contains(err.Error(), "line 8:") {
		t.Errorf("one differing output (line 14): %v", err)
	}
	steps, err = Parse("```sh\nls no-such-file\necho after\n```\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := Follow(steps, dir, nil, t.Logf); err == nil || !strings.Contains(err.Error(), "no-such-file") {
		t.Errorf("a failing command: %v", err)
	}
}
