package templates

import (
	"slices"
	"strings"
	"text/template/parse"

	"github.com/herald-notify/herald/internal/herald"
)

// Variables returns the top-level data keys the template needs for locale
// (resolved as Render resolves it), sorted: "name" for {{.name}}, "order"
// for {{.order.id}}, also inside if/else/range/with pipelines and $.x
// anywhere. Inside a {{range}} or {{with}} body dot is the element, so
// {{range .items}}{{.sku}}{{end}} needs "items" only.
//
// channels restricts the walk to those channels; none means every channel
// of the template. nil means the template needs no data. Fields that do not parse are skipped (Validate reports
// them). Values read with index ({{index . "coupon"}}) are optional and not
// listed.
//
// The analysis is static and conservative: a variable used only inside an
// {{if}} branch is still listed, because missingkey=error makes the render
// fail if that branch runs without it.
func Variables(t Template, locale string, channels ...herald.Channel) []string {
	seen := map[string]bool{}
	for _, path := range requiredPaths(t, locale, channels) {
		seen[path[0]] = true
	}
	if len(seen) == 0 {
		return nil
	}
	return sortedKeys(seen)
}

// MissingVariables returns, sorted, the variables the template needs (see
// Variables) that data lacks — the list for a 422 at submit time. A missing
// top-level key is reported by name ("name"); a nested path whose parent is
// present but lacks the key, or is not an object, is reported as the dotted
// path up to the missing key ("order.id"). nil means nothing is missing.
func MissingVariables(t Template, locale string, data map[string]any, channels ...herald.Channel) []string {
	missing := map[string]bool{}
	for _, path := range requiredPaths(t, locale, channels) {
		var cur any = data
		for i, key := range path {
			m, ok := asMap(cur)
			if !ok {
				missing[strings.Join(path[:i+1], ".")] = true
				break
			}
			v, ok := m[key]
			if !ok {
				missing[strings.Join(path[:i+1], ".")] = true
				break
			}
			cur = v
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return sortedKeys(missing)
}

func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[string]string:
		out := make(map[string]any, len(m))
		for k, s := range m {
			out[k] = s
		}
		return out, true
	}
	return nil, false
}

// requiredPaths lists the field chains read from the root data, in a
// deterministic order.
func requiredPaths(t Template, locale string, channels []herald.Channel) [][]string {
	if len(channels) == 0 {
		channels = herald.Channels
	}
	c := t.contentFor(ResolveLocale(locale, t.AvailableLocales(), t.BaseLocale()))
	var paths [][]string
	for _, ch := range herald.Channels { // canonical order, filtered
		if !slices.Contains(channels, ch) {
			continue
		}
		for _, f := range c.fields(ch) {
			if f.src == "" || len(f.src) > MaxFieldBytes {
				continue
			}
			p, err := parsedTree(f)
			if err != nil {
				continue
			}
			collectPaths(p.root, true, &paths)
		}
	}
	return paths
}

// collectPaths walks n, appending every field chain that starts at the root
// data. dotIsRoot tells whether dot is the root data at n.
func collectPaths(n parse.Node, dotIsRoot bool, out *[][]string) {
	switch x := n.(type) {
	case nil:
	case *parse.ListNode:
		if x == nil {
			return
		}
		for _, c := range x.Nodes {
			collectPaths(c, dotIsRoot, out)
		}
	case *parse.ActionNode:
		collectPaths(x.Pipe, dotIsRoot, out)
	case *parse.PipeNode:
		if x == nil {
			return
		}
		for _, c := range x.Cmds {
			collectPaths(c, dotIsRoot, out)
		}
	case *parse.CommandNode:
		for _, a := range x.Args {
			collectPaths(a, dotIsRoot, out)
		}
	case *parse.ChainNode:
		collectPaths(x.Node, dotIsRoot, out)
	case *parse.FieldNode:
		if dotIsRoot && len(x.Ident) > 0 {
			*out = append(*out, append([]string(nil), x.Ident...))
		}
	case *parse.VariableNode:
		if len(x.Ident) > 1 && x.Ident[0] == "$" {
			*out = append(*out, append([]string(nil), x.Ident[1:]...))
		}
	case *parse.IfNode:
		collectPaths(x.Pipe, dotIsRoot, out)
		collectPaths(x.List, dotIsRoot, out)
		collectPaths(x.ElseList, dotIsRoot, out)
	case *parse.RangeNode:
		collectPaths(x.Pipe, dotIsRoot, out)
		collectPaths(x.List, false, out) // dot is the element
		collectPaths(x.ElseList, dotIsRoot, out)
	case *parse.WithNode:
		collectPaths(x.Pipe, dotIsRoot, out)
		collectPaths(x.List, dotIsRoot && isBareDot(x.Pipe), out) // dot is the pipeline's value
		collectPaths(x.ElseList, dotIsRoot, out)
	}
}

// isBareDot reports whether pipe is just "." ({{with .}}), which keeps dot.
func isBareDot(p *parse.PipeNode) bool {
	if p == nil || len(p.Decl) > 0 || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return false
	}
	_, ok := p.Cmds[0].Args[0].(*parse.DotNode)
	return ok
}
