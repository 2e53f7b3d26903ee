package templates

import (
	"strconv"
	"text/template/parse"
)

// readingBuiltins are the text/template builtins that keep their own
// implementation (see funcMap) but read their operands in time proportional to
// their size, with the first operand so read: the comparisons compare strings
// byte by byte, index hashes its keys (not the collection). The other
// builtins (len, slice, and, or, not) take constant time per operand.
var readingBuiltins = map[string]int{
	"eq": 1, "ne": 1, "lt": 1, "le": 1, "gt": 1, "ge": 1,
	"index": 2,
}

// predefinedEscapers are html/template's: in an email html field they must
// stay last in a printing pipeline (html/template refuses them elsewhere).
var predefinedEscapers = map[string]bool{"html": true, "urlquery": true}

// instrument rewrites a parsed field so that executing it charges the budget
// of funcMap:
//
//   - every {{range}} pipeline ends in rangeFunc COST, COST being the nodes of
//     its body and else branch (without nested ranges' bodies, which charge
//     their own), so a loop is charged iterations × COST steps before it
//     runs its first iteration;
//   - every operand of a comparison (eq, ne, lt, le, gt, ge) and every key of
//     an index that is not a number, bool or nil constant is wrapped in
//     (readFunc ARG), and such a builtin that is not first in its pipeline
//     gets readFunc in front of it (its last operand comes from the previous
//     command): {{if eq .a .b}} becomes
//     {{if eq (_herald_read .a) (_herald_read .b)}};
//   - every printing action ends in readFunc (in email html: before a
//     trailing html or urlquery), so what html/template's escapers read is
//     charged even when they print little of it;
//   - in email html, {{html A B...}} and {{urlquery A B...}} become
//     {{print A B... | html}}: html/template would otherwise rewrite them into
//     a call of its internal, unbudgeted fmt.Sprint of every argument.
//
// Wrapping an argument in a one-command pipeline keeps its value and its
// laziness: and/or still short-circuit, a missing key is still an error.
func instrument(list *parse.ListNode, html bool) {
	if list == nil {
		return
	}
	for _, n := range list.Nodes {
		switch x := n.(type) {
		case *parse.ActionNode:
			instrumentPipe(x.Pipe, len(x.Pipe.Decl) == 0, html)
		case *parse.IfNode:
			instrumentBranch(&x.BranchNode, html)
		case *parse.WithNode:
			instrumentBranch(&x.BranchNode, html)
		case *parse.RangeNode:
			instrumentBranch(&x.BranchNode, html)
			cost := 1 + countSteps(x.List) + countSteps(x.ElseList)
			pos := x.Pipe.Pos
			x.Pipe.Cmds = append(x.Pipe.Cmds, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: pos,
				Args: []parse.Node{parse.NewIdentifier(rangeFunc).SetPos(pos), intNode(cost, pos)}})
		}
	}
}

func instrumentBranch(b *parse.BranchNode, html bool) {
	instrumentPipe(b.Pipe, false, html)
	instrument(b.List, html)
	instrument(b.ElseList, html)
}

// instrumentPipe instruments pipeline p; printing tells whether its value is
// printed (an action that declares no variable).
func instrumentPipe(p *parse.PipeNode, printing, html bool) {
	if p == nil {
		return
	}
	if printing && html && len(p.Cmds) == 1 {
		if id := ident(p.Cmds[0]); predefinedEscapers[id] && len(p.Cmds[0].Args) > 1 {
			c := p.Cmds[0]
			p.Cmds = []*parse.CommandNode{
				{NodeType: parse.NodeCommand, Pos: c.Pos, Args: append([]parse.Node{parse.NewIdentifier("print").SetPos(c.Pos)}, c.Args[1:]...)},
				identCmd(id, c.Pos),
			}
		}
	}
	cmds := make([]*parse.CommandNode, 0, len(p.Cmds)+2)
	for i, c := range p.Cmds {
		for _, a := range c.Args[1:] {
			instrumentArg(a, html)
		}
		if first := readingBuiltins[ident(c)]; first > 0 {
			for j := first; j < len(c.Args); j++ {
				switch c.Args[j].(type) {
				case *parse.NumberNode, *parse.BoolNode, *parse.NilNode:
				default:
					c.Args[j] = readPipe(c.Args[j])
				}
			}
			if i > 0 {
				cmds = append(cmds, identCmd(readFunc, c.Pos))
			}
		} else {
			instrumentArg(c.Args[0], html)
		}
		cmds = append(cmds, c)
	}
	p.Cmds = cmds
	if !printing {
		return
	}
	last := len(p.Cmds) - 1
	if html && predefinedEscapers[ident(p.Cmds[last])] {
		if last > 0 {
			p.Cmds = append(p.Cmds[:last], identCmd(readFunc, p.Cmds[last].Pos), p.Cmds[last])
		}
		return
	}
	p.Cmds = append(p.Cmds, identCmd(readFunc, p.Pos))
}

// instrumentArg instruments the pipelines nested in an argument: (...) and
// (...).field.
func instrumentArg(a parse.Node, html bool) {
	switch x := a.(type) {
	case *parse.PipeNode:
		instrumentPipe(x, false, html)
	case *parse.ChainNode:
		instrumentArg(x.Node, html)
	}
}

func ident(c *parse.CommandNode) string {
	if id, ok := c.Args[0].(*parse.IdentifierNode); ok {
		return id.Ident
	}
	return ""
}

func identCmd(name string, pos parse.Pos) *parse.CommandNode {
	return &parse.CommandNode{NodeType: parse.NodeCommand, Pos: pos, Args: []parse.Node{parse.NewIdentifier(name).SetPos(pos)}}
}

// readPipe is (readFunc a).
func readPipe(a parse.Node) *parse.PipeNode {
	pos := a.Position()
	return &parse.PipeNode{NodeType: parse.NodePipe, Pos: pos, Cmds: []*parse.CommandNode{{
		NodeType: parse.NodeCommand, Pos: pos, Args: []parse.Node{parse.NewIdentifier(readFunc).SetPos(pos), a}}}}
}

func intNode(n int, pos parse.Pos) *parse.NumberNode {
	return &parse.NumberNode{NodeType: parse.NodeNumber, Pos: pos, IsInt: true, Int64: int64(n), Text: strconv.Itoa(n)}
}

// countSteps counts the nodes below n that one execution of n may evaluate,
// not descending into nested {{range}} bodies (those charge themselves).
func countSteps(n parse.Node) int {
	count := 0
	var visit func(parse.Node)
	visit = func(n parse.Node) {
		switch x := n.(type) {
		case nil:
			return
		case *parse.ListNode:
			if x == nil {
				return
			}
			for _, c := range x.Nodes {
				visit(c)
			}
			return
		case *parse.PipeNode:
			if x == nil {
				return
			}
			for _, c := range x.Cmds {
				visit(c)
			}
			return
		}
		count++
		switch x := n.(type) {
		case *parse.ActionNode:
			visit(x.Pipe)
		case *parse.CommandNode:
			for _, a := range x.Args {
				visit(a)
			}
		case *parse.ChainNode:
			visit(x.Node)
		case *parse.IfNode:
			visit(x.Pipe)
			visit(x.List)
			visit(x.ElseList)
		case *parse.WithNode:
			visit(x.Pipe)
			visit(x.List)
			visit(x.ElseList)
		case *parse.RangeNode:
			visit(x.Pipe) // its body is charged by its own rangeFunc
		}
	}
	visit(n)
	return count
}
