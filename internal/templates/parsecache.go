package templates

import (
	htmltemplate "html/template"
	"io"
	"sync"
	texttemplate "text/template"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Parsing a field (lexing, the forbidden-construct checks, instrument) and
// binding it to its functions is most of what rendering one costs, and the API
// renders every channel of every submission once to refuse what cannot be
// delivered. What a field parses to depends only on the field (channel, name,
// kind, source), so a parsed field is kept, with a pool of executable copies
// bound to functions that charge a swappable budget (budgetRef): a render takes
// a copy, points it at its own budget, executes and gives it back. A copy is
// used by one render at a time, and each html copy has its own tree, which
// html/template escapes on its first execution and reuses after, as it does for
// any template parsed once and executed many times. The output is the one a
// fresh parse gives: the cache changes cost, not results, and the package stays
// deterministic.
//
// Bounded for a shared process: at most parseCacheEntries fields, each at most
// parseCacheMaxSrc bytes of source, with their pooled copies (which the garbage
// collector may drop at any time); a larger field is parsed on every render. A
// tenant saving many templates costs others cache hits, never memory.
const (
	parseCacheEntries = 1024
	parseCacheMaxSrc  = 4 << 10
)

// cachedField is a parsed field and its pool of executable copies.
type cachedField struct {
	parsed *parsedField // bound to a throwaway budget: never executed
	copies sync.Pool    // of *boundCopy
}

// boundCopy is an executable copy of a cached field and the budget ref its
// functions charge.
type boundCopy struct {
	text *texttemplate.Template
	html *htmltemplate.Template
	ref  *budgetRef
}

var parseCache, _ = lru.New[field, *cachedField](parseCacheEntries) // only a size ≤ 0 errs

// cached is field f's cache entry, parsing f on a miss; nil (and no error) when
// f is too large to cache.
func cached(f field) (*cachedField, error) {
	if len(f.src) > parseCacheMaxSrc {
		return nil, nil
	}
	if e, ok := parseCache.Get(f); ok {
		return e, nil
	}
	p, err := parseField(f, nil)
	if err != nil {
		return nil, err // errors are rare and cheap to find again: not cached
	}
	e := &cachedField{parsed: p}
	parseCache.Add(f, e)
	return e, nil
}

// parsedTree is field f parsed, from the cache when it fits, for reading its
// tree (not for executing).
func parsedTree(f field) (*parsedField, error) {
	e, err := cached(f)
	switch {
	case err != nil:
		return nil, err
	case e == nil:
		return parseField(f, nil)
	}
	return e.parsed, nil
}

// executeField executes field f with data into w, charging budget b.
func executeField(f field, b *budget, w io.Writer, data any) error {
	e, err := cached(f)
	if err != nil {
		return err
	}
	if e == nil {
		p, err := parseField(f, b)
		if err != nil {
			return err
		}
		return p.execute(w, data)
	}
	bc, _ := e.copies.Get().(*boundCopy)
	if bc == nil {
		if bc, err = e.bind(); err != nil {
			return err
		}
	}
	bc.ref.b = b
	if bc.html != nil {
		err = bc.html.Execute(w, data)
	} else {
		err = bc.text.Execute(w, data)
	}
	bc.ref.b = nil
	e.copies.Put(bc)
	return err
}

// bind makes an executable copy of the cached field. Funcs validates every
// function by reflection, which is why copies are pooled rather than made per
// render.
func (e *cachedField) bind() (*boundCopy, error) {
	bc := &boundCopy{ref: &budgetRef{}}
	p := e.parsed
	if p.html != nil {
		t, err := htmltemplate.New(p.html.Name()).Option("missingkey=error").Funcs(funcMapOf(bc.ref)).AddParseTree(p.html.Name(), p.html.Tree.Copy())
		if err != nil {
			return nil, err
		}
		bc.html = t
		return bc, nil
	}
	// text/template never changes a tree it executes: copies share it.
	t, err := texttemplate.New(p.text.Name()).Option("missingkey=error").Funcs(funcMapOf(bc.ref)).AddParseTree(p.text.Name(), p.text.Tree)
	if err != nil {
		return nil, err
	}
	bc.text = t
	return bc, nil
}
