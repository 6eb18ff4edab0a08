// Package doccmd reads the shell commands a Markdown page shows, so a test
// can run exactly what a reader would type: the fenced sh blocks of one
// section, parsed by a real shell parser (mvdan.cc/sh), each command with
// its trailing comment and the sample output shown as comment lines
// beneath it, and the inline code of the section's prose.
package doccmd

import (
	"fmt"
	"regexp"
	"strings"
)

// Section is the part of a page under one heading, down to the next
// heading of the same or a higher level.
type Section struct {
	Heading string
	Line    int // the heading's line in the page, from 1
	lines   []string
}

// FindSection returns the section of page under the heading whose text is
// heading (any level), or an error naming it when there is none.
func FindSection(page, heading string) (Section, error) {
	lines := strings.Split(page, "\n")
	fenced := fencedLines(lines)
	for i, line := range lines {
		level, text := headingOf(line)
		if fenced[i] || level == 0 || text != heading {
			continue
		}
		end := len(lines)
		for j := i + 1; j < len(lines); j++ {
			if l, _ := headingOf(lines[j]); !fenced[j] && l > 0 && l <= level {
				end = j
				break
			}
		}
		return Section{Heading: heading, Line: i + 1, lines: lines[i+1 : end]}, nil
	}
	return Section{}, fmt.Errorf("no heading %q", heading)
}

// headingOf is an ATX heading's level and text, or level 0.
func headingOf(line string) (int, string) {
	hashes := len(line) - len(strings.TrimLeft(line, "#"))
	if hashes == 0 || hashes > 6 || !strings.HasPrefix(line[hashes:], " ") {
		return 0, ""
	}
	return hashes, strings.TrimSpace(line[hashes:])
}

// fencedLines marks the lines that are inside a fenced block or are its
// fences.
func fencedLines(lines []string) []bool {
	marks := make([]bool, len(lines))
	in := false
	for i, line := range lines {
		fence := strings.HasPrefix(strings.TrimSpace(line), "```")
		marks[i] = in || fence
		if fence {
			in = !in
		}
	}
	return marks
}

// Block is a fenced code block of a section.
type Block struct {
	Lang string
	Line int // its first content line in the page, from 1
	Text string
}

// Blocks are the section's fenced blocks in language lang ("sh"), in order.
func (s Section) Blocks(lang string) []Block {
	var blocks []Block
	var cur *Block
	for i, line := range s.lines {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &Block{Lang: strings.TrimPrefix(trimmed, "```"), Line: s.Line + i + 2}
		case cur != nil && strings.HasPrefix(trimmed, "```"):
			if cur.Lang == lang {
				blocks = append(blocks, *cur)
			}
			cur = nil
		case cur != nil:
			cur.Text += line + "\n"
		}
	}
	return blocks
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// InlineCode is the text of every `code span` in the section's prose
// (outside its fenced blocks), in order; as in CommonMark, a span may
// wrap across lines, and its line breaks read as spaces.
func (s Section) InlineCode() []string {
	fenced := fencedLines(s.lines)
	var prose strings.Builder
	for i, line := range s.lines {
		if !fenced[i] {
			prose.WriteString(line + "\n")
		}
	}
	var spans []string
	for _, m := range codeSpan.FindAllStringSubmatch(prose.String(), -1) {
		spans = append(spans, strings.Join(strings.Fields(m[1]), " "))
	}
	return spans
}
