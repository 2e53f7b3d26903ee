package templates

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/template/parse"

	"github.com/herald-notify/herald/internal/herald"
)

// Email skeletons: one email content for many recipients whose renders differ
// only in plain variables, sent in one provider call with per-recipient
// substitutions (SendGrid: one personalization per recipient, each with its own
// substitutions map, replaced in the subject and every content part).
//
// A skeleton is the template rendered once with every variable it prints set to
// a token: "-hs" + 8 hex digits (the nonce, the same for every token of a
// skeleton) + "-" + a number + "-", letters, digits and dashes only, which
// neither text/template, html/template's escapers nor the HTML sanitizer change.
// The subject and the text part share one token per variable, the html part has
// its own (the same value is HTML-escaped there). A recipient's substitutions map
// each token to the variable's value as the template prints it (in the html
// part: escaped as in element content, then sanitized as the whole part is).
//
// Nothing is assumed about where a variable stands: Substitutions checks, for
// every recipient, that the skeleton with the recipient's substitutions is
// byte for byte the recipient's own render (subject, html and text), and that the
// render contains no token nonce at all. A recipient that fails either check
// (a value printed in an attribute or URL that escapes differently, a subject
// value with a line break, a value containing a token, ...) is not batchable and
// goes the single way. The second check makes the result independent of how a
// provider applies the map (at once, or one tag after another in any order): a
// token can only be found where the skeleton put it, since no value or literal
// text contains the nonce and a token's first and last bytes ("-") cannot be
// part of a nonce.

// ErrNotBatchable is returned (wrapped, with the reason) by NewEmailSkeleton for
// email content that cannot be split into a skeleton and substitutions: a part
// uses anything but text and plain variables ({{if}}, {{range}}, {{with}},
// pipelines, functions, variables of its own, {{.}}), a variable is printed both
// whole and through one of its fields, or the tokens alone would exceed
// MaxSubstitutionBytes.
var ErrNotBatchable = errors.New("email content is not batchable")

// MaxSubstitutionBytes caps one recipient's substitutions, keys and values
// together: SendGrid's limit for the substitutions of one personalization
// ("may not exceed 10,000 bytes per personalization object",
// sendgrid_mail_v3.json). Substitutions reports a recipient over it as not
// batchable.
const MaxSubstitutionBytes = 10_000

// skeletonNonceTries is how many nonces NewEmailSkeleton tries before it gives
// up on a template whose text or shared data contains each of them.
const skeletonNonceTries = 8

// EmailSkeleton is a template's email content for one locale with plain
// variables replaced by tokens, shared by every recipient it is batchable for
// (see Substitutions). It is read-only after NewEmailSkeleton and safe for
// concurrent use.
type EmailSkeleton struct {
	// Key identifies the content (Subject, HTML and Text): recipients whose
	// substitutions come from skeletons with equal keys can share one provider
	// call. It is a digest, not a secret.
	Key string
	// TemplateID, Version and Locale are the template and resolved locale the
	// skeleton was built from (see Render).
	TemplateID string
	Version    int
	Locale     string
	// Subject, HTML and Text are the content to send, with tokens. HTML is
	// sanitized (SanitizeEmailHTML) and Subject folded to one line, as Render's.
	Subject string
	HTML    string
	Text    string

	nonce  string
	fields []skeletonField
	// parts are Subject, HTML and Text cut at their tokens.
	subject, html, text []segment
	// keyBytes is the size of every token key a recipient's map holds.
	keyBytes int
}

// skeletonField is one variable of the skeleton: the field chain it reads from
// the root data and its tokens ("" where the skeleton does not show it).
type skeletonField struct {
	path      []string
	textToken string
	htmlToken string
	// subjectOnly: the text token stands in the subject and not in the text
	// part, so its value is folded to one line as the subject is.
	subjectOnly bool
}

// segment is literal text followed by a token ("" at the end).
type segment struct {
	lit   string
	token string
}

// NewEmailSkeleton builds the email skeleton of template t for locale (resolved
// as Render resolves it). shared is data every recipient is expected to have
// the same: a top-level key of shared that the template reads is rendered into
// the skeleton (when every chain under it resolves in shared) instead of being
// a token, which keeps each recipient's substitutions small; pass nil to make
// every variable a token. A recipient whose data differs from shared there is
// simply not batchable (Substitutions checks). The error wraps ErrNotBatchable
// when the content is not made of text and plain variables, or a render error
// (a budget, a missing shared variable) otherwise.
//
// Cost: one render of the email fields under one render budget (see Render),
// and a walk of their parse trees.
func NewEmailSkeleton(t Template, locale string, shared map[string]any) (*EmailSkeleton, error) {
	if !t.hasChannel(herald.ChannelEmail) {
		return nil, fmt.Errorf("%w: %s", ErrChannelNotInTemplate, herald.ChannelEmail)
	}
	resolved := ResolveLocale(locale, t.AvailableLocales(), t.BaseLocale())
	c := t.contentFor(resolved)
	fs := c.fields(herald.ChannelEmail) // subject, html, text
	var paths [][]string
	used := map[string]bool{} // the chains in paths, by key
	var textPaths, htmlPaths []string
	for _, f := range fs {
		if f.src == "" {
			continue
		}
		if len(f.src) > MaxFieldBytes {
			return nil, &RenderError{Channel: f.channel, Field: f.name, Locale: resolved,
				Err: fmt.Errorf("%w: %d bytes, the limit is %d", ErrFieldTooLarge, len(f.src), MaxFieldBytes)}
		}
		p, err := parsedTree(f)
		if err != nil {
			return nil, &RenderError{Channel: f.channel, Field: f.name, Locale: resolved, Err: err}
		}
		found, err := plainVariables(f, p.root)
		if err != nil {
			return nil, err
		}
		for _, path := range found {
			k := pathKey(path)
			if !used[k] {
				paths = append(paths, path)
			}
			used[k] = true
			if f.html {
				htmlPaths = append(htmlPaths, k)
			} else {
				textPaths = append(textPaths, k)
			}
		}
	}
	normShared, err := normalizeData(shared)
	if err != nil {
		return nil, err
	}
	fixed := fixedKeys(paths, normShared)
	var vars [][]string // the variables that become tokens, in source order
	for _, path := range paths {
		if !fixed[path[0]] {
			vars = append(vars, path)
		}
	}
	if err := checkPrefixes(vars); err != nil {
		return nil, err
	}
	inText, inHTML := setOf(textPaths), setOf(htmlPaths)
	sources := make([]string, 0, len(fs))
	for _, f := range fs {
		sources = append(sources, f.src)
	}
	for try := 0; try < skeletonNonceTries; try++ {
		nonce := skeletonNonce(try, sources)
		if anyContains(sources, nonce) {
			continue
		}
		s, err := buildSkeleton(t, resolved, c, nonce, vars, inText, inHTML, normShared, fixed)
		if errors.Is(err, errStrayNonce) {
			continue
		}
		return s, err
	}
	return nil, fmt.Errorf("%w: the template's text or shared data contains every token nonce tried", ErrNotBatchable)
}

// errStrayNonce: the rendered skeleton holds the nonce where no token is (the
// shared data contains it); another nonce is tried.
var errStrayNonce = errors.New("nonce outside a token")

func buildSkeleton(t Template, locale string, c content, nonce string, vars [][]string, inText, inHTML map[string]bool,
	shared map[string]any, fixed map[string]bool) (*EmailSkeleton, error) {
	s := &EmailSkeleton{TemplateID: t.ID, Version: t.Version, Locale: locale, nonce: nonce}
	textData, htmlData := map[string]any{}, map[string]any{}
	for k := range fixed {
		textData[k], htmlData[k] = shared[k], shared[k]
	}
	tokenOf := map[string]int{} // token → index in s.fields
	n := 0
	for _, path := range vars {
		k := pathKey(path)
		sf := skeletonField{path: path}
		if inText[k] {
			sf.textToken = token(nonce, n)
			n++
			tokenOf[sf.textToken] = len(s.fields)
			setPath(textData, path, sf.textToken)
		}
		if inHTML[k] {
			sf.htmlToken = token(nonce, n)
			n++
			tokenOf[sf.htmlToken] = len(s.fields)
			setPath(htmlData, path, sf.htmlToken)
		}
		s.fields = append(s.fields, sf)
	}
	r := renderer{b: newBudget(), locale: locale}
	vals := map[string]string{}
	for _, f := range c.fields(herald.ChannelEmail) {
		r.data = textData
		if f.html {
			r.data = htmlData
		}
		out, err := r.field(f)
		if err != nil {
			return nil, err
		}
		vals[f.name] = out
	}
	s.Subject, s.Text = foldLines(vals["subject"]), vals["text"]
	if c.Email.HTML != "" {
		s.HTML = SanitizeEmailHTML(vals["html"])
	}
	inSubject, inTextPart, inHTMLPart := map[string]bool{}, map[string]bool{}, map[string]bool{}
	var err error
	if s.subject, err = cutTokens(s.Subject, nonce, tokenOf, s.fields, false, inSubject); err != nil {
		return nil, err
	}
	if s.text, err = cutTokens(s.Text, nonce, tokenOf, s.fields, false, inTextPart); err != nil {
		return nil, err
	}
	if s.html, err = cutTokens(s.HTML, nonce, tokenOf, s.fields, true, inHTMLPart); err != nil {
		return nil, err
	}
	// Keep the variables the skeleton shows (the sanitizer may have dropped a
	// token with the markup around it), and their tokens only where shown.
	kept := s.fields[:0]
	for _, sf := range s.fields {
		sf.subjectOnly = inSubject[sf.textToken] && !inTextPart[sf.textToken]
		if !inSubject[sf.textToken] && !inTextPart[sf.textToken] {
			sf.textToken = ""
		}
		if !inHTMLPart[sf.htmlToken] {
			sf.htmlToken = ""
		}
		if sf.textToken != "" || sf.htmlToken != "" {
			kept = append(kept, sf)
			s.keyBytes += len(sf.textToken) + len(sf.htmlToken)
		}
	}
	s.fields = kept
	if s.keyBytes > MaxSubstitutionBytes {
		return nil, fmt.Errorf("%w: its %d variables' tokens alone take %d bytes of the %d a recipient's substitutions may",
			ErrNotBatchable, len(s.fields), s.keyBytes, MaxSubstitutionBytes)
	}
	sum := sha256.New()
	for _, part := range []string{s.Subject, s.HTML, s.Text} {
		sum.Write([]byte(strconv.Itoa(len(part)) + ":" + part))
	}
	s.Key = hex.EncodeToString(sum.Sum(nil)[:16])
	return s, nil
}

// Substitutions returns the substitutions that turn the skeleton into r, the
// recipient's own render of the skeleton's template (Render, for the
// skeleton's locale) with data, the data r was rendered with. ok is false when
// the recipient is not batchable with this skeleton, and the recipient must
// then be sent its render alone: r is for another template, version, locale or
// channel; the skeleton with the substitutions would not be r byte for byte
// (say a variable printed in an attribute or URL escapes differently there);
// r contains the skeleton's token nonce (a value holding a token); or the
// substitutions exceed MaxSubstitutionBytes. The map has one entry per token
// the skeleton shows (none for a skeleton without variables).
//
// Cost: each variable printed once, under one render budget, and a
// comparison with r; it stops as soon as the substitutions exceed
// MaxSubstitutionBytes.
func (s *EmailSkeleton) Substitutions(r Rendered, data map[string]any) (map[string]string, bool) {
	e := r.Email
	if e == nil || r.Channel != herald.ChannelEmail || r.TemplateID != s.TemplateID || r.Version != s.Version || r.Locale != s.Locale {
		return nil, false
	}
	if strings.Contains(e.Subject, s.nonce) || strings.Contains(e.HTML, s.nonce) || strings.Contains(e.Text, s.nonce) {
		return nil, false
	}
	subs := make(map[string]string, 2*len(s.fields))
	var norm map[string]any // data as Render sees it, made when first needed
	var b *budget
	size := s.keyBytes
	for _, sf := range s.fields {
		str, isStr := lookupString(data, sf.path)
		for _, html := range []bool{false, true} {
			tok := sf.textToken
			if html {
				tok = sf.htmlToken
			}
			if tok == "" {
				continue
			}
			// A string prints as itself in text, and so in html when nothing
			// in it is escaped or sanitized; anything else is printed by the
			// template engine itself.
			v := str
			if !isStr || (html && !htmlInvariant(str)) {
				if norm == nil {
					var err error
					if norm, err = normalizeData(data); err != nil {
						return nil, false
					}
					b = newBudget()
				}
				var err error
				if v, err = printVariable(sf.path, html, b, norm); err != nil {
					return nil, false
				}
				if html {
					v = SanitizeEmailHTML(v)
				}
			}
			if !html && sf.subjectOnly {
				v = lineBreaks.Replace(v)
			}
			if size += len(v); size > MaxSubstitutionBytes {
				return nil, false
			}
			subs[tok] = v
		}
	}
	if !matches(s.subject, subs, e.Subject) || !matches(s.html, subs, e.HTML) || !matches(s.text, subs, e.Text) {
		return nil, false
	}
	return subs, true
}

// lookupString is the string at path in data (maps as JSON decodes them, or
// Data), if that is what is there.
func lookupString(data map[string]any, path []string) (string, bool) {
	var cur any = data
	for _, k := range path {
		var m map[string]any
		switch x := cur.(type) {
		case map[string]any:
			m = x
		case Data:
			m = x
		default:
			return "", false
		}
		var ok bool
		if cur, ok = m[k]; !ok {
			return "", false
		}
	}
	str, ok := cur.(string)
	return str, ok
}

// htmlInvariant reports whether s is the same once html/template escaped it in
// element content and the sanitizer re-serialized it: none of the bytes either
// rewrites (NUL " & ' + < > CR).
func htmlInvariant(s string) bool { return !strings.ContainsAny(s, "\x00\"&'+<>\r") }

// printVariable prints the variable at path as a template part of its own
// prints it ({{.a.b}}: text/template, or html/template in element content),
// charging b.
func printVariable(path []string, html bool, b *budget, data map[string]any) (string, error) {
	name := "subject"
	if html {
		name = "html"
	}
	f := field{channel: herald.ChannelEmail, name: name, src: "{{." + strings.Join(path, ".") + "}}", html: html}
	w := &limitedWriter{limit: MaxRenderedFieldBytes}
	if err := executeField(f, b, w, data); err != nil {
		return "", err
	}
	return w.buf.String(), nil
}

// matches reports whether the segments with subs are exactly want, without
// building the result.
func matches(segs []segment, subs map[string]string, want string) bool {
	for _, sg := range segs {
		if !strings.HasPrefix(want, sg.lit) {
			return false
		}
		want = want[len(sg.lit):]
		if sg.token == "" {
			continue
		}
		v, ok := subs[sg.token]
		if !ok || !strings.HasPrefix(want, v) {
			return false
		}
		want = want[len(v):]
	}
	return want == ""
}

// cutTokens cuts part at its tokens, recording each token seen. Every
// occurrence of the nonce must be inside a token of the right kind (html or
// not); anything else is errStrayNonce.
func cutTokens(part, nonce string, tokenOf map[string]int, fields []skeletonField, html bool, seen map[string]bool) ([]segment, error) {
	var segs []segment
	for {
		i := strings.Index(part, nonce)
		if i < 0 {
			return append(segs, segment{lit: part}), nil
		}
		if i == 0 || part[i-1] != '-' {
			return nil, errStrayNonce
		}
		rest := part[i+len(nonce):]
		end := -1
		if strings.HasPrefix(rest, "-") {
			if j := strings.IndexByte(rest[1:], '-'); j > 0 {
				end = i + len(nonce) + 1 + j + 1 // one past the closing '-'
			}
		}
		if end < 0 {
			return nil, errStrayNonce
		}
		tok := part[i-1 : end]
		fi, ok := tokenOf[tok]
		if !ok || (html && fields[fi].htmlToken != tok) || (!html && fields[fi].textToken != tok) {
			return nil, errStrayNonce
		}
		seen[tok] = true
		segs = append(segs, segment{lit: part[:i-1], token: tok})
		part = part[end:]
	}
}

// plainVariables returns the field chains of the variables field f prints,
// in source order, or an ErrNotBatchable error naming the first node that is
// not text or a plain variable. root is f's parse tree as the parse cache keeps
// it: instrumented, so a printed variable is {{.a.b | _herald_read}}.
func plainVariables(f field, root *parse.ListNode) ([][]string, error) {
	var out [][]string
	if root == nil {
		return nil, nil
	}
	for _, n := range root.Nodes {
		switch x := n.(type) {
		case *parse.TextNode:
		case *parse.ActionNode:
			path := variablePath(x.Pipe)
			if path == nil {
				return nil, notBatchable(f, n, "is not a plain variable")
			}
			out = append(out, path)
		case *parse.IfNode:
			return nil, notBatchable(f, n, "is a conditional")
		case *parse.RangeNode:
			return nil, notBatchable(f, n, "is a loop")
		case *parse.WithNode:
			return nil, notBatchable(f, n, "is a {{with}}")
		default:
			return nil, notBatchable(f, n, "is not text or a plain variable")
		}
	}
	return out, nil
}

// variablePath is the chain {{.a.b}} or {{$.a.b}} prints, nil for any other
// pipeline.
func variablePath(p *parse.PipeNode) []string {
	if p == nil || len(p.Decl) > 0 || p.IsAssign {
		return nil
	}
	cmds := p.Cmds
	if n := len(cmds); n == 2 && ident(cmds[1]) == readFunc && len(cmds[1].Args) == 1 {
		cmds = cmds[:1]
	}
	if len(cmds) != 1 || len(cmds[0].Args) != 1 {
		return nil
	}
	switch a := cmds[0].Args[0].(type) {
	case *parse.FieldNode:
		return append([]string(nil), a.Ident...)
	case *parse.VariableNode:
		if len(a.Ident) > 1 && a.Ident[0] == "$" {
			return append([]string(nil), a.Ident[1:]...)
		}
	}
	return nil
}

func notBatchable(f field, n parse.Node, why string) error {
	src := n.String()
	if len(src) > 40 {
		src = src[:37] + "..."
	}
	return fmt.Errorf("%w: %s.%s line %d: %s %s", ErrNotBatchable, f.channel, f.name, lineAt(f.src, int(n.Position())), src, why)
}

// fixedKeys are the top-level keys of shared under which every chain the
// template prints resolves in shared: those are rendered into the skeleton.
func fixedKeys(paths [][]string, shared map[string]any) map[string]bool {
	fixed := map[string]bool{}
	broken := map[string]bool{}
	for _, path := range paths {
		if _, ok := shared[path[0]]; !ok {
			continue
		}
		if resolves(shared, path) {
			fixed[path[0]] = true
		} else {
			broken[path[0]] = true
		}
	}
	for k := range broken {
		delete(fixed, k)
	}
	return fixed
}

func resolves(data map[string]any, path []string) bool {
	var cur any = data
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[k]; !ok {
			return false
		}
	}
	return true
}

// checkPrefixes refuses a variable printed both whole and through a field
// ({{.user}} and {{.user.name}}): one token cannot be both a string and an
// object.
func checkPrefixes(vars [][]string) error {
	keys := make([]string, len(vars))
	for i, v := range vars {
		keys[i] = pathKey(v) + "."
	}
	sort.Strings(keys)
	for i := 1; i < len(keys); i++ {
		if strings.HasPrefix(keys[i], keys[i-1]) {
			return fmt.Errorf("%w: .%s is printed both whole and through its field .%s", ErrNotBatchable,
				strings.TrimSuffix(keys[i-1], "."), strings.TrimSuffix(keys[i], "."))
		}
	}
	return nil
}

// setPath sets data[path[0]]...[path[n-1]] = v, making the maps on the way
// (checkPrefixes guarantees none of them is a token).
func setPath(data map[string]any, path []string, v string) {
	m := data
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

func pathKey(path []string) string { return strings.Join(path, ".") }

func setOf(keys []string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

func anyContains(list []string, s string) bool {
	for _, x := range list {
		if strings.Contains(x, s) {
			return true
		}
	}
	return false
}

// skeletonNonce is the try-th nonce for a template with these sources:
// deterministic, so the same template always gets the same skeleton.
func skeletonNonce(try int, sources []string) string {
	h := sha256.New()
	h.Write([]byte("herald email skeleton " + strconv.Itoa(try)))
	for _, s := range sources {
		h.Write([]byte("\x00" + strconv.Itoa(len(s)) + ":" + s))
	}
	return "hs" + hex.EncodeToString(h.Sum(nil)[:4])
}

// token is the i-th token of a skeleton with nonce.
func token(nonce string, i int) string { return "-" + nonce + "-" + strconv.Itoa(i) + "-" }
