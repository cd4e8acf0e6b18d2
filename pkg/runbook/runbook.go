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

// Package runbook reads a guide written in Markdown as what a reader does
// with it, so that a test can do the same and the guide cannot rot: each
// `sh` block is commands to run, each `yaml` block whose first line is a
// comment naming a file is that file's content, and each `text` block is
// what the last command before it prints.
package runbook

import (
	"bufio"
	"fmt"
	"strings"
)

// Kind says what a Step is.
type Kind string

const (
	// Command is a shell command line (continuation lines joined).
	Command Kind = "command"
	// File is a file to write.
	File Kind = "file"
	// Output is what the previous Command prints.
	Output Kind = "output"
)

// Step is one thing the guide has its reader do, in order.
type Step struct {
	Kind Kind
	// Text is the command, the file's content or the output.
	Text string
	// Name is a File's name.
	Name string
	// Line is where it starts in the guide (1-based), for messages.
	Line int
}

// Parse reads the guide's steps. A yaml block without a file name comment
// is an example, not a step; an Output with no Command before it is an
// error, as is an unterminated block.
func Parse(markdown string) ([]Step, error) {
	var steps []Step
	var block []string
	kind, start := "", 0
	sc := bufio.NewScanner(strings.NewReader(markdown))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		fence := strings.TrimSpace(line)
		switch {
		case kind == "" && strings.HasPrefix(fence, "```"):
			kind, start, block = strings.TrimPrefix(fence, "```"), n, nil
		case kind != "" && fence == "```":
			s, err := blockSteps(kind, block, start, steps)
			if err != nil {
				return nil, err
			}
			steps, kind = append(steps, s...), ""
		case kind != "":
			block = append(block, line)
		}
	}
	if kind != "" {
		return nil, fmt.Errorf("line %d: the %s block is not closed", start, kind)
	}
	return steps, sc.Err()
}

// blockSteps are the steps of one fenced block of kind whose body (lines)
// starts after line start; before are the steps so far.
func blockSteps(kind string, lines []string, start int, before []Step) ([]Step, error) {
	switch kind {
	case "sh":
		return commands(lines, start+1), nil
	case "yaml":
		if len(lines) == 0 || !strings.HasPrefix(lines[0], "# ") || strings.ContainsAny(strings.TrimPrefix(lines[0], "# "), " /") {
			return nil, nil
		}
		return []Step{{Kind: File, Name: strings.TrimPrefix(lines[0], "# "), Text: strings.Join(lines[1:], "\n") + "\n", Line: start}}, nil
	case "text":
		if len(before) == 0 || before[len(before)-1].Kind != Command {
			return nil, fmt.Errorf("line %d: output that no command before it prints", start)
		}
		return []Step{{Kind: Output, Text: strings.Join(lines, "\n"), Line: start}}, nil
	}
	return nil, nil
}

// commands are the command lines of a shell block whose first line is
// line first: comments and blank lines dropped, lines ending in a
// backslash joined with the next.
func commands(lines []string, first int) []Step {
	var out []Step
	var cur []string
	at := 0
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if len(cur) == 0 && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if len(cur) == 0 {
			at = first + i
		}
		if strings.HasSuffix(t, `\`) {
			cur = append(cur, strings.TrimSpace(strings.TrimSuffix(t, `\`)))
			continue
		}
		cur = append(cur, t)
		out = append(out, Step{Kind: Command, Text: strings.Join(cur, " "), Line: at})
		cur = nil
	}
	return out
}

// Ellipsis in an expected line matches the rest of the actual line.
const Ellipsis = "..."

// Match says how got (what a command printed) differs from want (a text
// block), "" when it does not: line by line, field by field (runs of
// spaces are one separator, as kubectl's columns are padded to the
// widest value), a field "..." matching the rest of the line.
func Match(want, got string) string {
	w, g := lines(want), lines(got)
	if len(w) != len(g) {
		return fmt.Sprintf("%d lines, want %d:\n%s", len(g), len(w), got)
	}
	for i := range w {
		if !fieldsMatch(strings.Fields(w[i]), strings.Fields(g[i])) {
			return fmt.Sprintf("line %d is %q, want %q", i+1, g[i], w[i])
		}
	}
	return ""
}

func fieldsMatch(want, got []string) bool {
	for i, f := range want {
		if f == Ellipsis {
			return true
		}
		if i >= len(got) || got[i] != f {
			return false
		}
	}
	return len(got) == len(want)
}

func lines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
