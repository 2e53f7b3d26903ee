package templates

import (
	"errors"
	"fmt"
	"reflect"
)

// Render budgets. One Render call (every field of the channel) shares one
// budget; so does one Validate call's dry run. Each limit is deterministic: it
// counts work, never wall-clock time, so a render that fails on it fails the
// same way on every retry.
const (
	// MaxRenderSteps caps the template steps one Render may run inside loops:
	// each {{range}} charges, before it starts, its iteration count times the
	// number of nodes in its body (nested ranges charge their own bodies when
	// they start). Steps outside loops are bounded by the source size.
	MaxRenderSteps = 1_000_000
	// MaxReadBytes caps the bytes one Render may hand to functions, comparisons
	// and the escapers of printed values (each call charges the size of what it
	// reads): the work a template does without producing output, such as
	// comparing two long strings in a loop or printing a long value into a CSS
	// attribute, where html/template's filter reduces it to "ZgotmplZ".
	MaxReadBytes = 4 << 20
	// MaxBuiltStringBytes caps one string a template function returns (print,
	// printf, println, html, js, urlquery, upper, lower, title, join, ...).
	MaxBuiltStringBytes = MaxRenderedFieldBytes
	// MaxBuiltBytes caps the bytes all template function calls of one Render
	// build together: {{$x = print $x $x}} repeated stops here, long before the
	// output cap would see it (it never writes anything).
	MaxBuiltBytes = 1 << 20
)

// Errors returned (wrapped) by rendering.
var (
	// ErrRenderBudget: the template exceeds MaxRangeIterations,
	// MaxRenderSteps or MaxReadBytes.
	ErrRenderBudget = errors.New("template exceeds the render budget")
	// ErrBuildBudget: a template function would return a string over
	// MaxBuiltStringBytes, or the functions of one render would build more
	// than MaxBuiltBytes.
	ErrBuildBudget = errors.New("template builds too much text")
	// ErrOutputTooLarge: a rendered field exceeds MaxRenderedFieldBytes.
	ErrOutputTooLarge = errors.New("rendered output exceeds the size limit")
	// ErrFuncNotAllowed: the template calls a disabled builtin (call).
	ErrFuncNotAllowed = errors.New("function not allowed in templates")
	// ErrPrintfFormat: printf was given a width/precision that is too large or '*'.
	ErrPrintfFormat = errors.New("printf format not allowed")
)

// isBudgetError reports whether err is a limit a template hits whatever its
// data: the errors Validate's dry run reports.
func isBudgetError(err error) bool {
	return errors.Is(err, ErrRenderBudget) || errors.Is(err, ErrBuildBudget) ||
		errors.Is(err, ErrOutputTooLarge) || errors.Is(err, ErrPrintfFormat) ||
		errors.Is(err, ErrFuncNotAllowed)
}

// Hidden functions the instrumentation (see instrument) adds to templates.
const (
	// rangeFunc is appended to every {{range}} pipeline: _herald_range COST V
	// charges the iterations of V and COST steps for each.
	rangeFunc = "_herald_range"
	// readFunc wraps the arguments of the builtins that read their operands
	// (eq, lt, index, ...) and ends every printing pipeline: it charges the
	// size of its value and passes it through.
	readFunc = "_herald_read"
)

// budget is what is left of one Render's (or one dry run's) limits.
type budget struct {
	iters int // {{range}} iterations
	steps int // steps inside loops
	read  int // bytes read by functions, comparisons and printed values
	built int // bytes built by functions
}

func newBudget() *budget {
	return &budget{iters: MaxRangeIterations, steps: MaxRenderSteps, read: MaxReadBytes, built: MaxBuiltBytes}
}

// rangeCharge charges a {{range}} over v whose body costs cost steps per
// iteration, and passes v through.
func (b *budget) rangeCharge(cost int, v any) (any, error) {
	n := 0
	rv := reflect.ValueOf(v)
	for rv.IsValid() && (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface) {
		rv = rv.Elem()
	}
	if rv.IsValid() {
		switch rv.Kind() {
		case reflect.Slice, reflect.Array, reflect.Map, reflect.Chan, reflect.String:
			n = rv.Len()
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			n = clampInt(rv.Int())
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			if rv.Uint() > uint64(MaxRangeIterations) {
				n = MaxRangeIterations + 1
			} else {
				n = int(rv.Uint())
			}
		}
	}
	// Charge at least one per range evaluation so an empty range inside a huge
	// loop still costs something.
	n = max(n, 1)
	if n > b.iters {
		b.iters = 0
		return nil, fmt.Errorf("%w: more than %d loop iterations", ErrRenderBudget, MaxRangeIterations)
	}
	b.iters -= n
	cost = max(cost, 1)
	if n > b.steps/cost {
		b.steps = 0
		return nil, fmt.Errorf("%w: a loop of %d iterations over a body of %d steps exceeds the %d steps a render may take", ErrRenderBudget, n, cost, MaxRenderSteps)
	}
	b.steps -= n * cost
	return v, nil
}

func clampInt(i int64) int {
	if i < 0 {
		return 0
	}
	if i > int64(MaxRangeIterations) {
		return MaxRangeIterations + 1
	}
	return int(i)
}

// charge charges n bytes read.
func (b *budget) charge(n int) error {
	if n > b.read {
		b.read = 0
		return fmt.Errorf("%w: functions and printed values read more than %d bytes", ErrRenderBudget, MaxReadBytes)
	}
	b.read -= n
	return nil
}

// readValue is readFunc: it charges v's size and passes v through.
func (b *budget) readValue(v any) (any, error) {
	if err := b.charge(sizeOf(v, b.read+1)); err != nil {
		return nil, err
	}
	return v, nil
}

// reserve fails when a string of n bytes may not be built (over the per-call
// cap, or over what is left); it charges nothing: call it before building with
// a lower bound of the result's size, then charge the result with build.
func (b *budget) reserve(n int) error {
	if n > MaxBuiltStringBytes {
		return fmt.Errorf("%w: a function would build a string of at least %d bytes; the limit is %d", ErrBuildBudget, n, MaxBuiltStringBytes)
	}
	if n > b.built {
		b.built = 0
		return fmt.Errorf("%w: functions build more than %d bytes in one render", ErrBuildBudget, MaxBuiltBytes)
	}
	return nil
}

// build charges a built string of n bytes.
func (b *budget) build(n int) error {
	if err := b.reserve(n); err != nil {
		return err
	}
	b.built -= n
	return nil
}

// sizeOf is the size of v as fmt prints it, roughly: exact for strings, an
// upper bound for numbers, the sum of the parts for lists and maps. It stops
// counting past limit, so measuring costs no more than what it charges.
func sizeOf(v any, limit int) int {
	switch x := v.(type) {
	case nil:
		return 5 // <nil>
	case string:
		return len(x)
	case []byte:
		return len(x)
	case bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return 24
	case []any:
		n := 2
		for _, e := range x {
			if n > limit {
				break
			}
			n += 1 + sizeOf(e, limit-n)
		}
		return n
	case map[string]any:
		n := 5 // map[]
		for k, e := range x {
			if n > limit {
				break
			}
			n += 2 + len(k) + sizeOf(e, limit-n)
		}
		return n
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		n := 2
		for i := 0; i < rv.Len() && n <= limit; i++ {
			n += 1 + sizeOf(rv.Index(i).Interface(), limit-n)
		}
		return n
	case reflect.Map:
		n := 5
		it := rv.MapRange()
		for n <= limit && it.Next() {
			n += 2 + sizeOf(it.Key().Interface(), limit-n) + sizeOf(it.Value().Interface(), limit-n)
		}
		return n
	case reflect.String:
		return rv.Len()
	}
	return 24
}

// argsSize is the sum of sizeOf over args, stopping past limit.
func argsSize(args []any, limit int) int {
	n := 0
	for _, a := range args {
		if n > limit {
			break
		}
		n += sizeOf(a, limit-n) + 1
	}
	return n
}
