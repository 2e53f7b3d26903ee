package templates

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
)

// Template bombs: templates written to make one render allocate or compute
// without bound. Each bomb is a field source built from a size n (how often the
// growing step repeats); n = 0 means the largest bomb that fits MaxFieldBytes.
// before is a size the unbounded (pre-budget) renderer survives, so its cost can
// be measured there; at the largest size it runs out of memory or time.
//
// Reproduce the numbers with
//
//	go test -run '^$' -bench 'BenchmarkBomb' -benchtime 1x ./internal/templates/
//
// and, for the unbounded renderer, the same command at the commit before the
// budgets, one sub-benchmark per process and under a memory cap
// (ulimit -v 4000000) for the /max ones.
type bomb struct {
	name string
	// channel is email (the src goes into email.html, so saving executes it)
	// or sms (email.text/sms.text are text/templates).
	channel herald.Channel
	prefix  string
	step    string
	suffix  string
	// before is the step count measured on the unbounded renderer.
	before int
	data   map[string]any
	// dataFree: the bomb needs no data, so the dry run on save (PUT) meets it.
	dataFree bool
	// want is the error rendering must now fail with; nil: refused when
	// parsed (a syntax error).
	want error
}

// src is the bomb's field source at size n (0: the largest that fits).
func (b bomb) src(n int) string {
	if n <= 0 {
		n = (MaxFieldBytes - len(b.prefix) - len(b.suffix)) / len(b.step)
	}
	return b.prefix + strings.Repeat(b.step, n) + b.suffix
}

func (b bomb) template(n int) Template {
	t := Template{ID: "bomb", Version: 1, Category: "c"}
	switch b.channel {
	case herald.ChannelEmail:
		t.Email = &EmailContent{Subject: "s", HTML: b.src(n)}
	default:
		t.SMS = &SMSContent{Text: b.src(n)}
	}
	return t
}

// bombData returns a fresh copy of the bomb's data (Render normalises it).
func (b bomb) bombData() map[string]any {
	if b.data == nil {
		return nil
	}
	out := make(map[string]any, len(b.data))
	for k, v := range b.data {
		out[k] = v
	}
	return out
}

// big is a data string of about the largest size a 64 KiB request can carry.
var big = strings.Repeat("a", 60<<10)

var bombs = []bomb{
	// Doubling a variable: no output at all, so the output cap never sees it.
	{name: "print", channel: "sms", prefix: `{{$x := "a"}}`, step: `{{$x = print $x $x}}`, suffix: `{{len $x}}`, before: 26, dataFree: true, want: ErrBuildBudget},
	{name: "printf", channel: "sms", prefix: `{{$x := "a"}}`, step: `{{$x = printf "%s%s" $x $x}}`, suffix: `{{len $x}}`, before: 26, dataFree: true, want: ErrBuildBudget},
	{name: "println", channel: "sms", prefix: `{{$x := "a"}}`, step: `{{$x = println $x $x}}`, suffix: `{{len $x}}`, before: 25, dataFree: true, want: ErrBuildBudget},
	{name: "html(email)", channel: "email", prefix: `{{$x := "<"}}`, step: `{{$x = html $x $x}}`, suffix: `{{len $x}}`, before: 22, dataFree: true, want: ErrBuildBudget},
	{name: "js", channel: "sms", prefix: `{{$x := "<"}}`, step: `{{$x = js $x $x}}`, suffix: `{{len $x}}`, before: 22, dataFree: true, want: ErrBuildBudget},
	{name: "urlquery", channel: "sms", prefix: `{{$x := "%"}}`, step: `{{$x = urlquery $x $x}}`, suffix: `{{len $x}}`, before: 20, dataFree: true, want: ErrBuildBudget},
	{name: "join", channel: "sms", prefix: `{{$x := "a"}}`, step: `{{$x = join $x $.l}}`, suffix: `{{len $x}}`, before: 26,
		data: map[string]any{"l": []any{"", "", ""}}, want: ErrBuildBudget},
	// html/template rewrites {{html a b c}} into {{_eval_args_ a b c | html}}:
	// an internal fmt.Sprint of every argument, before any output.
	{name: "html-args(email)", channel: "email", prefix: `{{$s := .s}}{{html `, step: `$s `, suffix: `}}`, before: 1000,
		data: map[string]any{"s": big}, want: ErrBuildBudget},
	// Loops: the range budget caps iterations, not what each iteration costs.
	{name: "truncate-loop", channel: "sms", prefix: `{{range 10000}}`, step: `{{$_ := truncate 5 $.s}}`, suffix: `{{end}}ok`, before: 1,
		data: map[string]any{"s": big}, want: ErrRenderBudget},
	{name: "eq-loop", channel: "sms", prefix: `{{range 10000}}`, step: `{{if eq $.a $.b}}{{end}}`, suffix: `{{end}}ok`, before: 10,
		data: map[string]any{"a": big + "a", "b": big + "b"}, want: ErrRenderBudget},
	{name: "css-filter-loop(email)", channel: "email", prefix: `{{range 9000}}`, step: `<i style="color:{{$.s}}">`, suffix: `{{end}}`, before: 1,
		data: map[string]any{"s": big + "}"}, want: ErrRenderBudget},
	{name: "index-key-loop", channel: "sms", prefix: `{{range 10000}}`, step: `{{$_ := index $.m $.k}}`, suffix: `{{end}}ok`, before: 1,
		data: map[string]any{"m": map[string]any{}, "k": big}, want: ErrRenderBudget},
	{name: "steps-loop", channel: "sms", prefix: `{{range 10000}}`, step: `{{if 1}}{{end}}`, suffix: `{{end}}ok`, before: 100, dataFree: true, want: ErrRenderBudget},
	{name: "range-int", channel: "sms", prefix: `{{range 1000000000}}`, step: `{{end}}{{range 1000000000}}`, suffix: `{{end}}ok`, before: 1, dataFree: true, want: ErrRenderBudget},
	{name: "range-nested", channel: "sms", prefix: ``, step: `{{range 100}}`, suffix: `ok` + strings.Repeat(`{{end}}`, 4), before: 4, dataFree: true, want: ErrRenderBudget},
	{name: "range-data-slice", channel: "sms", prefix: ``, step: `{{range slice $.l 0}}{{end}}`, suffix: `ok`, before: 1,
		data: map[string]any{"l": make([]any, 20_000)}, want: ErrRenderBudget},
	{name: "template-recursion", channel: "sms", prefix: `{{define "r"}}{{template "r" .}}{{end}}`, step: `{{template "r" .}}`, suffix: ``, before: 1, dataFree: true},
	{name: "template-self", channel: "sms", prefix: ``, step: `{{template "sms.text" .}}`, suffix: ``, before: 1, dataFree: true},
	{name: "printf-width", channel: "sms", prefix: ``, step: `{{printf "%999999999d" 1}}`, suffix: ``, before: 1, dataFree: true, want: ErrPrintfFormat},
}

// fixedSize: these bombs do not grow with n (their n only repeats a step that
// is refused at once); run them at their before size only.
func (b bomb) fixedSize() bool {
	switch b.name {
	case "range-int", "range-nested", "template-recursion", "template-self", "printf-width", "range-data-slice", "truncate-loop", "css-filter-loop(email)", "index-key-loop":
		return true
	}
	return false
}

func (b bomb) sizes() []int {
	if b.fixedSize() {
		return []int{b.before}
	}
	return []int{b.before, 0}
}

func sizeName(n int) string {
	if n == 0 {
		return "max"
	}
	return fmt.Sprintf("n=%d", n)
}

// normalTemplate is the floor: an ordinary template's render, measured in the
// same run.
func normalTemplate() Template { return validTemplate() }

var (
	floorOnce  sync.Once
	floorBytes float64
)

// floor is the bytes allocated by one render of every channel of an ordinary
// template (the average over 200 renders).
func floor() float64 {
	floorOnce.Do(func() {
		t := normalTemplate()
		const runs = 200
		floorBytes = float64(allocated(func() {
			for range runs {
				for _, ch := range t.Channels() {
					if _, err := Render(t, ch, "en", shippedData()); err != nil {
						panic(err)
					}
				}
			}
		})) / runs
	})
	return floorBytes
}

// allocated is the TotalAlloc delta of fn (every goroutine's allocations).
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func renderBomb(b bomb, t Template) error {
	_, err := Render(t, b.channel, "en", b.bombData())
	return err
}

// BenchmarkBombRender renders each bomb as a worker (or the preview API) would.
// x-floor is the bytes allocated per render against an ordinary template's.
func BenchmarkBombRender(b *testing.B) {
	fl := floor() // outside the sub-benchmarks, whose B/op it would inflate
	b.Run("floor", func(b *testing.B) {
		t := normalTemplate()
		b.ReportAllocs()
		for b.Loop() {
			for _, ch := range t.Channels() {
				if _, err := Render(t, ch, "en", shippedData()); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(1, "x-floor")
	})
	for _, bm := range bombs {
		for _, n := range bm.sizes() {
			b.Run(bm.name+"/"+sizeName(n), func(b *testing.B) {
				t := bm.template(n)
				b.ReportAllocs()
				var err error
				total := allocated(func() {
					for i := 0; i < b.N; i++ {
						err = renderBomb(bm, t)
					}
				})
				b.ReportMetric(float64(total)/float64(b.N)/fl, "x-floor")
				b.Logf("%s: %s", bm.name, shortErr(err))
			})
		}
	}
}

// BenchmarkBombValidate validates each bomb as PUT /v1/templates does (saving
// executes the template against no data).
func BenchmarkBombValidate(b *testing.B) {
	fl := floor()
	for _, bm := range bombs {
		for _, n := range bm.sizes() {
			b.Run(bm.name+"/"+sizeName(n), func(b *testing.B) {
				t := bm.template(n)
				b.ReportAllocs()
				var errs []FieldError
				total := allocated(func() {
					for i := 0; i < b.N; i++ {
						errs = Validate(t)
					}
				})
				b.ReportMetric(float64(total)/float64(b.N)/fl, "x-floor")
				if len(errs) == 0 {
					b.Logf("%s: saved (no error)", bm.name)
				} else {
					b.Logf("%s: %s", bm.name, shortErr(errs[0]))
				}
			})
		}
	}
}

func shortErr(err error) string {
	if err == nil {
		return "no error"
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// maxBombAlloc bounds what one bomb may allocate, rendering or validating.
const maxBombAlloc = 64 << 20

// TestBombsAreBounded: every bomb, at its measured size and at the largest
// that fits a field, fails with its error, allocating less than maxBombAlloc
// in well under a second. The data-free ones are refused by Validate (a 422 on
// PUT) naming their field and line; the others fail to render (render_failed
// in the worker), unless what they need of the budget is known before any
// data is read (a loop over a constant), which Validate refuses too.
func TestBombsAreBounded(t *testing.T) {
	fl := floor()
	for _, bm := range bombs {
		for _, n := range bm.sizes() {
			t.Run(bm.name+"/"+sizeName(n), func(t *testing.T) {
				tpl := bm.template(n)
				var err error
				start := time.Now()
				got := allocated(func() { err = renderBomb(bm, tpl) })
				took := time.Since(start)
				t.Logf("render: %.1f KiB allocated (%.1f× floor), %v: %v", float64(got)/1024, float64(got)/fl, took.Round(time.Millisecond), shortErr(err))
				var re *RenderError
				switch {
				case !errors.As(err, &re) || re.Channel != bm.channel:
					t.Fatalf("err = %v, want a RenderError on %s", err, bm.channel)
				case bm.want == nil:
					var se *syntaxError
					if !errors.As(err, &se) {
						t.Fatalf("err = %v, want a syntax error", err)
					}
				case !errors.Is(err, bm.want):
					t.Fatalf("err = %v, want %v", err, bm.want)
				}
				if got > maxBombAlloc {
					t.Errorf("render allocated %d MiB, want < %d MiB", got>>20, maxBombAlloc>>20)
				}
				if took > time.Second {
					t.Errorf("render took %v", took)
				}

				var errs []FieldError
				got = allocated(func() { errs = Validate(tpl) })
				if got > maxBombAlloc {
					t.Errorf("validate allocated %d MiB, want < %d MiB", got>>20, maxBombAlloc>>20)
				}
				field := "text"
				if bm.channel == herald.ChannelEmail {
					field = "html"
				}
				switch {
				case bm.dataFree && (len(errs) != 1 || errs[0].Channel != bm.channel || errs[0].Field != field || errs[0].Line != 1):
					t.Errorf("Validate = %v, want one error on %s.%s line 1", errs, bm.channel, field)
				case len(errs) > 1 || len(errs) == 1 && (errs[0].Channel != bm.channel || errs[0].Field != field):
					t.Errorf("Validate = %v, want at most one error, on %s.%s", errs, bm.channel, field)
				case len(errs) == 1:
					t.Logf("validate: %.1f KiB allocated: %s", float64(got)/1024, errs[0])
				}
			})
		}
	}
}
