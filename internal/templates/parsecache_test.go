package templates

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/herald-notify/herald/internal/herald"
)

// A field rendered from the parse cache renders exactly as a fresh parse:
// html escaping happens once per render (the cached tree is never the one
// escaped), and concurrent renders of one field with different data do not
// see each other's data.
func TestCachedFieldsRenderLikeFreshOnes(t *testing.T) {
	tpl := validTemplate()
	data := func(i int) map[string]any {
		return map[string]any{"name": fmt.Sprintf("<b>%d</b>", i), "order": map[string]any{"id": fmt.Sprint(i)}}
	}
	want := func(i int) string {
		return fmt.Sprintf("<p>Hi &lt;b&gt;%d&lt;/b&gt;,</p>\n<p>your order %d is on its way.</p>", i, i)
	}
	for i := range 3 { // a miss, then hits
		r, err := Render(tpl, herald.ChannelEmail, "en", data(i))
		if err != nil {
			t.Fatal(err)
		}
		if r.Email.HTML != want(i) {
			t.Fatalf("render %d: html = %q, want %q", i, r.Email.HTML, want(i))
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			r, err := Render(tpl, herald.ChannelEmail, "en", data(i))
			switch {
			case err != nil:
				errs <- err
			case r.Email.HTML != want(i) || r.Email.Subject != fmt.Sprintf("Order %d shipped", i):
				errs <- fmt.Errorf("render %d: %q / %q", i, r.Email.Subject, r.Email.HTML)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Every render has its own budget, also when the field comes from the cache: a
// bomb fails the same way the second and third time.
func TestCachedFieldsKeepTheirBudget(t *testing.T) {
	checked := 0
	for _, bm := range bombs {
		n := bm.sizes()[0]
		tpl := bm.template(n)
		first := renderBomb(bm, tpl)
		if first == nil {
			t.Fatalf("%s: rendered", bm.name)
		}
		for range 2 {
			again := renderBomb(bm, tpl)
			if again == nil || again.Error() != first.Error() || bm.want != nil && !errors.Is(again, bm.want) {
				t.Fatalf("%s from the cache: %v, first render: %v", bm.name, again, first)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no bombs")
	}
}
