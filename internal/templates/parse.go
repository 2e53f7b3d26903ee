package templates

import (
	"errors"
	htmltemplate "html/template"
	"io"
	"regexp"
	"strconv"
	"strings"
	texttemplate "text/template"
	"text/template/parse"
)

// parsedField is a parsed, checked field ready to execute.
type parsedField struct {
	f       field
	root    *parse.ListNode
	text    *texttemplate.Template
	html    *htmltemplate.Template
	srcSize int
}

func (p *parsedField) execute(w io.Writer, data any) error {
	if p.html != nil {
		return p.html.Execute(w, data)
	}
	return p.text.Execute(w, data)
}

// syntaxError is a parse-time problem with a field, located by line (0 when
// unknown).
type syntaxError struct {
	line int
	msg  string
	err  error // the cause, when it is one of the package's errors
}

func (e *syntaxError) Unwrap() error { return e.err }

func (e *syntaxError) Error() string {
	if e.line > 0 {
		return "line " + strconv.Itoa(e.line) + ": " + e.msg
	}
	return e.msg
}

var nameUnsafe = strings.NewReplacer(":", "_", " ", "_")

// parseField parses one field with the allow-listed functions and budget b,
// rejects forbidden constructs (and printf formats it can check before
// running) and instruments the tree for the budget (see instrument). Errors
// are *syntaxError.
func parseField(f field, b *budget) (*parsedField, error) {
	name := nameUnsafe.Replace(string(f.channel) + "." + f.name)
	p := &parsedField{f: f, srcSize: len(f.src)}
	var trees []*parse.Tree
	if f.html {
		t, err := htmltemplate.New(name).Option("missingkey=error").Funcs(funcMap(b)).Parse(f.src)
		if err != nil {
			return nil, toSyntaxError(err, f.src)
		}
		p.html = t
		for _, x := range t.Templates() {
			trees = append(trees, x.Tree)
		}
		p.root = t.Tree.Root
	} else {
		t, err := texttemplate.New(name).Option("missingkey=error").Funcs(funcMap(b)).Parse(f.src)
		if err != nil {
			return nil, toSyntaxError(err, f.src)
		}
		p.text = t
		for _, x := range t.Templates() {
			trees = append(trees, x.Tree)
		}
		p.root = t.Tree.Root
	}
	if len(trees) > 1 {
		// {{define}} or {{block}} added a second template; report where it starts.
		line := 0
		for _, tr := range trees {
			if tr != nil && tr.Root != nil && tr.Name != name {
				line = lineAt(f.src, int(tr.Root.Position()))
				break
			}
		}
		return nil, &syntaxError{line: line, msg: "{{define}} and {{block}} are not allowed"}
	}
	var bad *syntaxError
	walkNodes(p.root, func(n parse.Node) {
		if bad != nil {
			return
		}
		switch x := n.(type) {
		case *parse.TemplateNode:
			bad = &syntaxError{line: x.Line, msg: "{{template}} is not allowed"}
		case *parse.CommandNode:
			// A constant printf format is checked now, so saving reports it.
			if id, ok := x.Args[0].(*parse.IdentifierNode); ok && id.Ident == "printf" && len(x.Args) > 1 {
				if format, ok := x.Args[1].(*parse.StringNode); ok {
					if err := checkPrintfFormat(format.Text); err != nil {
						bad = &syntaxError{line: lineAt(f.src, int(format.Pos)), msg: err.Error(), err: err}
					}
				}
			}
		}
	})
	if bad != nil {
		return nil, bad
	}
	instrument(p.root, f.html)
	return p, nil
}

// "template: NAME:LINE:COL: executing "NAME" at <CONTEXT>: error calling FUNC: MESSAGE"
// (text/template's error format for a function's error).
var execErrRE = regexp.MustCompile(`(?s)^template: [^:]*:(\d+):\d+: executing "[^"]*" at <(.*?)>: (?:error calling ([^:]*): )?(.*)$`)

// execError turns an execution error that hit a limit (see isBudgetError)
// into a *syntaxError located by line, wrapping err, with text/template's
// prefix dropped and the hidden budget functions left out of the message:
// "line 3: print $x $x: template builds too much text: ...". Other errors
// are returned as they are.
func execError(err error) error {
	if !isBudgetError(err) {
		return err
	}
	m := execErrRE.FindStringSubmatch(err.Error())
	if m == nil {
		return &syntaxError{msg: err.Error(), err: err}
	}
	line, _ := strconv.Atoi(m[1])
	msg := m[4]
	if !strings.HasPrefix(m[3], "_herald_") && !strings.HasPrefix(m[2], "_herald_") {
		msg = m[2] + ": " + msg
	}
	return &syntaxError{line: line, msg: msg, err: err}
}

// "template: NAME:LINE: message" (text/template/parse's error format).
var parseErrRE = regexp.MustCompile(`^template: [^:]*:(\d+): (.*)$`)

func toSyntaxError(err error, src string) error {
	var he *htmltemplate.Error
	if errors.As(err, &he) {
		return htmlSyntaxError(he, src)
	}
	msg := err.Error()
	if m := parseErrRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &syntaxError{line: line, msg: m[2]}
	}
	return &syntaxError{msg: strings.TrimPrefix(msg, "template: ")}
}

// htmlSyntaxError converts an html/template escaping error, locating it by
// its node when it carries no line and dropping the escaper's internal
// context dump ("…: {stateURL delimDoubleQuote …}").
func htmlSyntaxError(he *htmltemplate.Error, src string) *syntaxError {
	line := he.Line
	if line == 0 && he.Node != nil {
		line = lineAt(src, int(he.Node.Position()))
	}
	msg := he.Description
	if i := strings.Index(msg, ": {state"); i >= 0 {
		msg = msg[:i]
	}
	return &syntaxError{line: line, msg: msg}
}

// lineAt is the 1-based line of byte offset pos in src.
func lineAt(src string, pos int) int {
	if pos > len(src) {
		pos = len(src)
	}
	if pos < 0 {
		pos = 0
	}
	return 1 + strings.Count(src[:pos], "\n")
}

// walkNodes calls fn on n and every node below it, depth first, in source
// order.
func walkNodes(n parse.Node, fn func(parse.Node)) {
	if n == nil {
		return
	}
	switch x := n.(type) {
	case *parse.ListNode:
		if x == nil {
			return
		}
		fn(x)
		for _, c := range x.Nodes {
			walkNodes(c, fn)
		}
		return
	case *parse.PipeNode:
		if x == nil {
			return
		}
		fn(x)
		for _, d := range x.Decl {
			walkNodes(d, fn)
		}
		for _, c := range x.Cmds {
			walkNodes(c, fn)
		}
		return
	}
	fn(n)
	switch x := n.(type) {
	case *parse.ActionNode:
		walkNodes(x.Pipe, fn)
	case *parse.CommandNode:
		for _, a := range x.Args {
			walkNodes(a, fn)
		}
	case *parse.ChainNode:
		walkNodes(x.Node, fn)
	case *parse.IfNode:
		walkBranch(&x.BranchNode, fn)
	case *parse.RangeNode:
		walkBranch(&x.BranchNode, fn)
	case *parse.WithNode:
		walkBranch(&x.BranchNode, fn)
	case *parse.TemplateNode:
		walkNodes(x.Pipe, fn)
	}
}

func walkBranch(b *parse.BranchNode, fn func(parse.Node)) {
	walkNodes(b.Pipe, fn)
	if b.List != nil {
		walkNodes(b.List, fn)
	}
	if b.ElseList != nil {
		walkNodes(b.ElseList, fn)
	}
}
