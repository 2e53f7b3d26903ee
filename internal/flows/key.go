package flows

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/template/parse"

	"github.com/herald-notify/herald/internal/ids"
)

// A digest's or throttle's key is a template expression over the event data,
// such as "{{.thread_id}}" or "{{.project}}/{{.thread_id}}": text and field
// references only. No functions, pipelines, conditions or loops, because the
// key is rendered for every event on the accept path and in the engine, and a
// key must be cheap to render and impossible to make expensive; text/template
// with Herald's functions would need the render budget for a string that only
// has to tell events apart.

// MaxRenderedKeyBytes caps a rendered key: the API refuses an event whose key
// renders longer (422), so no key is ever cut, and two keys that differ only
// past the cap can never share a digest or a throttle bucket. The engine
// renders keys with RenderKey too (activities.RenderFlowKey).
const MaxRenderedKeyBytes = 200

// ParseKey checks a key expression: at most MaxKeyBytes of text and
// {{.field}} / {{.a.b}} references.
func ParseKey(expr string) error {
	_, err := parseKey(expr)
	return err
}

// keyPart is a piece of a parsed key: literal text, or a data path to look up.
type keyPart struct {
	text string
	path []string
}

func parseKey(expr string) ([]keyPart, error) {
	if len(expr) > MaxKeyBytes {
		return nil, fmt.Errorf("a key is at most %d bytes", MaxKeyBytes)
	}
	if !printable(expr) {
		return nil, errors.New("a key is printable text")
	}
	trees, err := parse.Parse("key", expr, "{{", "}}")
	if err != nil {
		return nil, fmt.Errorf("a key is text and {{.field}} references: %v", cleanParseError(err))
	}
	tree := trees["key"]
	if tree == nil || tree.Root == nil || len(trees) != 1 {
		return nil, errors.New("a key is text and {{.field}} references, such as \"{{.thread_id}}\"")
	}
	var parts []keyPart
	for _, n := range tree.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			parts = append(parts, keyPart{text: string(n.Text)})
		case *parse.ActionNode:
			if len(n.Pipe.Decl) == 0 && len(n.Pipe.Cmds) == 1 && len(n.Pipe.Cmds[0].Args) == 1 {
				if f, ok := n.Pipe.Cmds[0].Args[0].(*parse.FieldNode); ok {
					parts = append(parts, keyPart{path: f.Ident})
					continue
				}
			}
			return nil, fmt.Errorf("%s: a key may only reference data fields, such as {{.thread_id}} (no functions, pipelines or variables)", n)
		default:
			return nil, fmt.Errorf("a key may only hold text and {{.field}} references (no if, range, with, define or comments)")
		}
	}
	return parts, nil
}

// cleanParseError drops text/template's "template: key:1:" prefix.
func cleanParseError(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "template: key:") {
		msg = msg[i+2:]
	}
	return msg
}

// RenderKey renders a key expression over an event's data: each {{.a.b}} is
// the value at that path (a string as it is, a number as written, a boolean
// as true or false, an object or array as its canonical JSON, absent or null
// as ""). The empty expression renders "". It fails for an expression
// ParseKey refuses and for a key over MaxRenderedKeyBytes.
func RenderKey(expr string, data map[string]any) (string, error) {
	if expr == "" {
		return "", nil
	}
	parts, err := parseKey(expr)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range parts {
		if p.path == nil {
			b.WriteString(p.text)
		} else {
			s, err := keyValue(lookup(data, p.path))
			if err != nil {
				return "", err
			}
			b.WriteString(s)
		}
		if b.Len() > MaxRenderedKeyBytes {
			return "", fmt.Errorf("the key renders to more than %d bytes", MaxRenderedKeyBytes)
		}
	}
	return b.String(), nil
}

func lookup(data map[string]any, path []string) any {
	var v any = data
	for _, name := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[name]
	}
	return v
}

func keyValue(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return strconv.FormatBool(x), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	}
	b, err := ids.CanonicalJSON(v)
	if err != nil {
		return "", fmt.Errorf("the key's value cannot be encoded: %w", err)
	}
	return string(b), nil
}
