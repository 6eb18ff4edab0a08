package doccmd

import (
	"fmt"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Command is one command of a block, as the shell would run it.
type Command struct {
	Args []string // its words after quote removal
	// Comment is the comment on the command's last line, without '#'.
	Comment string
	// Output is the comment-only lines right below the command, without
	// their '#' and one space: the output the page shows for it.
	Output []string
	Line   int // its first line in the page, from 1
}

// String is the command as one line.
func (c Command) String() string { return strings.Join(c.Args, " ") }

// Commands parses the block as a shell script. Each statement must be a
// simple command of literal words (quotes allowed): a page's commands are
// for copying, so a variable, a pipe or a substitution is an error that
// names its line.
func (b Block) Commands() ([]Command, error) {
	f, err := syntax.NewParser(syntax.KeepComments(true)).Parse(strings.NewReader(b.Text), "")
	if err != nil {
		return nil, fmt.Errorf("block at line %d: %w", b.Line, err)
	}
	comments := slices.Clone(f.Last)
	for _, st := range f.Stmts {
		comments = append(comments, st.Comments...)
	}
	lines := strings.Split(b.Text, "\n")
	var cmds []Command
	for _, st := range f.Stmts {
		line := b.Line + int(st.Pos().Line()) - 1
		call, ok := st.Cmd.(*syntax.CallExpr)
		if !ok || len(st.Redirs) > 0 || st.Background || st.Negated || len(call.Assigns) > 0 {
			return nil, fmt.Errorf("line %d: not a simple command", line)
		}
		args, err := literalWords(call.Args)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		end := st.End().Line()
		cmds = append(cmds, Command{
			Args: args, Line: line,
			Comment: trailingComment(comments, end),
			Output:  outputBelow(lines, int(end)),
		})
	}
	return cmds, nil
}

// literalWords are the words' values after quote removal; anything the
// shell would expand is an error.
func literalWords(words []*syntax.Word) ([]string, error) {
	var args []string
	for _, w := range words {
		var b strings.Builder
		for _, part := range w.Parts {
			if err := writeLiteral(&b, part); err != nil {
				return nil, err
			}
		}
		args = append(args, b.String())
	}
	return args, nil
}

func writeLiteral(b *strings.Builder, part syntax.WordPart) error {
	switch p := part.(type) {
	case *syntax.Lit:
		// The parser keeps a backslash-escaped character's backslash.
		b.WriteString(unescape(p.Value))
	case *syntax.SglQuoted:
		b.WriteString(p.Value)
	case *syntax.DblQuoted:
		for _, inner := range p.Parts {
			lit, ok := inner.(*syntax.Lit)
			if !ok {
				return fmt.Errorf("word %q: expansions are not allowed in a page's commands", quotedSource(p))
			}
			b.WriteString(lit.Value)
		}
	default:
		return fmt.Errorf("word part %T at %s: expansions are not allowed in a page's commands", part, part.Pos())
	}
	return nil
}

// unescape drops the backslash of each \c in an unquoted word.
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func quotedSource(p *syntax.DblQuoted) string {
	var b strings.Builder
	_ = syntax.NewPrinter().Print(&b, &syntax.Word{Parts: []syntax.WordPart{p}})
	return b.String()
}

// trailingComment is the text of the comment on line, if any.
func trailingComment(comments []syntax.Comment, line uint) string {
	for _, c := range comments {
		if c.Hash.Line() == line {
			return strings.TrimSpace(c.Text)
		}
	}
	return ""
}

// outputBelow is the run of comment-only lines right after line (1-based
// within the block), without "#" and one space.
func outputBelow(lines []string, line int) []string {
	var out []string
	for _, l := range lines[min(line, len(lines)):] {
		trimmed := strings.TrimSpace(l)
		if !strings.HasPrefix(trimmed, "#") {
			break
		}
		text := strings.TrimPrefix(trimmed, "#")
		out = append(out, strings.TrimPrefix(text, " "))
	}
	return out
}

// Calls lists the simple commands anywhere in a shell script (in
// pipelines, conditions and functions too), each as its words; a word
// the shell would expand is given as written.
func Calls(name string, script []byte) ([][]string, error) {
	f, err := syntax.NewParser().Parse(strings.NewReader(string(script)), name)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	var calls [][]string
	printer := syntax.NewPrinter()
	syntax.Walk(f, func(node syntax.Node) bool {
		call, ok := node.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		var words []string
		for _, w := range call.Args {
			if lit, err := literalWords([]*syntax.Word{w}); err == nil {
				words = append(words, lit[0])
				continue
			}
			var b strings.Builder
			_ = printer.Print(&b, w)
			words = append(words, b.String())
		}
		calls = append(calls, words)
		return true
	})
	return calls, nil
}
